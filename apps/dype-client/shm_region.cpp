#include "shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "common/error.h"

namespace dype::client {

ClientRegion::ClientRegion(Transport& transport, const std::string& role, std::size_t bytes)
    : NamedRegion("dype-client-" + std::to_string(getpid()) + "-" + role, bytes),
      transport_(transport),
      key_("/" + name_) {
  fd_ = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd_ < 0)
    throw Error("--shm: cannot create shared-memory object " + key_ + ": " + std::strerror(errno));
  if (ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) {
    const std::string why = std::strerror(errno);
    close(fd_);
    shm_unlink(key_.c_str());
    throw Error("--shm: cannot size " + key_ + " to " + std::to_string(bytes_) + " bytes: " + why);
  }
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const std::string why = std::strerror(errno);
    close(fd_);
    shm_unlink(key_.c_str());
    throw Error("--shm: cannot map " + key_ + ": " + why);
  }
  data_ = static_cast<char*>(p);
  try {
    transport_.register_region(name_, key_, bytes_);
    registered_ = true;
  } catch (...) {
    munmap(data_, bytes_);
    close(fd_);
    shm_unlink(key_.c_str());
    throw;
  }
}

ClientRegion::~ClientRegion() {
  if (registered_) {
    try {
      transport_.unregister_region(name_);
    } catch (const std::exception& e) {
      std::cerr << "dype-client: could not unregister shared-memory region " << name_ << ": "
                << e.what() << "\n";
    }
  }
  munmap(data_, bytes_);
  close(fd_);
  shm_unlink(key_.c_str());
}

void ClientRegion::write(const void* src, std::size_t n) {
  check_range(0, n);
  std::memcpy(data_, src, n);
}

void ClientRegion::read(std::size_t offset, void* dst, std::size_t n) const {
  check_range(offset, n);
  std::memcpy(dst, data_ + offset, n);
}

void NamedRegion::check_range(std::size_t offset, std::size_t n) const {
  if (offset > bytes_ || n > bytes_ - offset)
    throw Error(std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                " lie outside region " + name_ + " (" + std::to_string(bytes_) + " bytes)");
}

rt::daemon::Tensor NamedRegion::tensor(const std::string& tensor_name, const std::string& datatype,
                                       std::vector<std::int64_t> shape) const {
  rt::daemon::Tensor t;
  t.name = tensor_name;
  t.datatype = datatype;
  t.shape = std::move(shape);
  t.shared_memory = rt::daemon::SharedMemoryRef{name_, 0, bytes_};
  return t;
}

rt::daemon::RequestedOutput NamedRegion::output(const std::string& output_name) const {
  return {output_name, false, rt::daemon::SharedMemoryRef{name_, 0, bytes_}, nullptr};
}

}  // namespace dype::client
