#pragma once
// HostBuffer: device memory that is host memory (64-byte aligned), or a size-only placeholder.
// The cpu backend's buffer; the emu backend uses it too, since emulated devices keep their data in
// host memory. BorrowedHostBuffer: host memory someone else owns (a request's input, read in
// place by the CPU's kernels), read-only.
#include <cstddef>
#include <memory>
#include <span>

#include "hw/buffer.h"

namespace dype::hw {

class HostBuffer final : public Buffer {
 public:
  HostBuffer(Device& device, std::size_t bytes, AllocMode mode);
  ~HostBuffer() override;
  std::span<std::byte> host_span() override { return {data_.get(), data_ ? size_bytes() : 0}; }
  std::span<const std::byte> host_span() const override {
    return {data_.get(), data_ ? size_bytes() : 0};
  }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
};

// Memory the buffer does not own, kept alive by `keep`. Read-only: the mutable view throws, so a
// kernel or copy that would write into a client's memory fails instead of changing it.
class BorrowedHostBuffer final : public Buffer {
 public:
  BorrowedHostBuffer(Device& device, std::span<const std::byte> bytes,
                     std::shared_ptr<const void> keep);
  std::span<std::byte> host_span() override;
  std::span<const std::byte> host_span() const override { return bytes_; }

 private:
  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> keep_;
};

}  // namespace dype::hw
