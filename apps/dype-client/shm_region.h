#pragma once
// A POSIX shared-memory object dype-client creates, maps and registers with dype-serve as a
// region (the system shared-memory extension, dype-serve --allow-client-shm), so a request's
// tensors travel by name instead of through the protocol. Unregistered, unmapped and unlinked when
// it goes, also when the request failed.
//
//   ClientRegion x(transport, "x", bytes);   std::memcpy(x.data(), features, bytes);
//   Tensor t = x.tensor("x", "FP32", {n, f});   // names the region, carries no bytes
#include <cstdint>
#include <string>
#include <vector>

#include "transport.h"

namespace dype::client {

// A registered region as requests name it: its name and size, the tensors that live in it.
class NamedRegion {
 public:
  virtual ~NamedRegion() = default;
  // Host bytes -> the region's start (n at most size()), and n bytes at `offset` -> host; Error
  // naming the region past its end.
  virtual void write(const void* src, std::size_t n) = 0;
  virtual void read(std::size_t offset, void* dst, std::size_t n) const = 0;
  const std::string& name() const { return name_; }
  std::size_t size() const { return bytes_; }
  // An input tensor whose bytes are this whole region.
  rt::daemon::Tensor tensor(const std::string& tensor_name, const std::string& datatype,
                            std::vector<std::int64_t> shape) const;
  // An output asked for into this whole region.
  rt::daemon::RequestedOutput output(const std::string& output_name) const;

 protected:
  NamedRegion(std::string name, std::size_t bytes) : name_(std::move(name)), bytes_(bytes) {}
  void check_range(std::size_t offset, std::size_t n) const;
  std::string name_;
  std::size_t bytes_ = 0;
};

class ClientRegion : public NamedRegion {
 public:
  // The object is /dype-client-<pid>-<role>; the region's name is the same without the slash.
  ClientRegion(Transport& transport, const std::string& role, std::size_t bytes);
  ~ClientRegion() override;
  ClientRegion(const ClientRegion&) = delete;
  ClientRegion& operator=(const ClientRegion&) = delete;

  char* data() const { return data_; }
  void write(const void* src, std::size_t n) override;
  void read(std::size_t offset, void* dst, std::size_t n) const override;

 private:
  Transport& transport_;
  std::string key_;
  int fd_ = -1;
  char* data_ = nullptr;
  bool registered_ = false;
};

}  // namespace dype::client
