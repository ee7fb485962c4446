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

class ClientRegion {
 public:
  // The object is /dype-client-<pid>-<role>; the region's name is the same without the slash.
  ClientRegion(Transport& transport, const std::string& role, std::size_t bytes);
  ~ClientRegion();
  ClientRegion(const ClientRegion&) = delete;
  ClientRegion& operator=(const ClientRegion&) = delete;

  char* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }
  // An input tensor whose bytes are this whole region.
  rt::daemon::Tensor tensor(const std::string& tensor_name, const std::string& datatype,
                            std::vector<std::int64_t> shape) const;
  // An output asked for into this whole region.
  rt::daemon::RequestedOutput output(const std::string& output_name) const;

 private:
  Transport& transport_;
  std::string name_, key_;
  int fd_ = -1;
  char* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool registered_ = false;
};

}  // namespace dype::client
