#pragma once
// One stage's output on its way to another host: a dense float32 matrix (rows x cols, row-major)
// with the request's sequence number and the plan epoch it was computed under (or, as a u8
// frame, 1 x n bytes of a message that travels with it). On the wire it is a
// fixed 48-byte header followed by the payload; the header is checked against the payload length
// the transport delivered before anything is sized from it, because it comes from another process.
//
//   Activation a = Activation::copy_of(/*epoch=*/3, /*seq=*/41, /*rows=*/2, /*cols=*/2, values);
//   std::array<std::byte, kActivationHeaderBytes> wire{};
//   encode_header(header_of(a, /*frame=*/0, /*window=*/8), wire);
//   ActivationHeader h = decode_header(wire, /*payload_bytes=*/16, "127.0.0.1:5000");  // checked
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dype::rt::remote {

// Element types a frame may carry: float32 activations, and bytes for what travels beside them
// (a remote stage's request description and graph, runtime/remote/stage_protocol.h). fp16/bf16
// activations can be added without changing the header layout.
enum class Dtype : std::uint16_t { f32 = 1, u8 = 2 };
const char* to_string(Dtype d);
std::size_t dtype_bytes(Dtype d);  // 0 for a code this build does not know

inline constexpr std::uint32_t kActivationMagic = 0x41505944;  // "DYPA" read little-endian
inline constexpr std::uint16_t kActivationVersion = 1;
inline constexpr std::size_t kActivationHeaderBytes = 48;

// What travels in front of the payload. `frame` counts the frames of one channel (0, 1, ...), so a
// receiver can tell a lost or reordered frame from a late one; `window` is the sender's bound on
// frames not yet consumed, which tells the receiver how often to hand back credit.
struct ActivationHeader {
  std::uint16_t version = kActivationVersion;
  Dtype dtype = Dtype::f32;
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::uint64_t epoch = 0;
  std::uint64_t seq = 0;
  std::uint64_t frame = 0;
  std::uint32_t window = 0;
};

// A frame the receiver will not accept: the message says which frame, from whom and why.
class ActivationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The matrix with its identity. The buffer is left uninitialised by `uninitialised` (a receive
// writes every byte; zeroing 1 MB first would cost as much as the hand-off's budget).
class Activation {
 public:
  Activation() = default;
  static Activation uninitialised(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows,
                                  std::uint32_t cols, Dtype dtype = Dtype::f32);
  static Activation copy_of(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows,
                            std::uint32_t cols, std::span<const float> values);
  // A u8 frame (1 x bytes.size()).
  static Activation bytes_of(std::uint64_t epoch, std::uint64_t seq, std::span<const std::byte> bytes);

  std::uint64_t epoch() const { return epoch_; }
  std::uint64_t seq() const { return seq_; }
  Dtype dtype() const { return dtype_; }
  std::uint32_t rows() const { return rows_; }
  std::uint32_t cols() const { return cols_; }
  std::size_t size() const { return std::size_t{rows_} * cols_; }
  std::size_t payload_bytes() const { return size() * dtype_bytes(dtype_); }
  // The elements as float32 (std::logic_error for a u8 frame).
  std::span<float> values();
  std::span<const float> values() const;
  std::span<std::byte> bytes() { return {data_.get(), payload_bytes()}; }
  std::span<const std::byte> bytes() const { return {data_.get(), payload_bytes()}; }

 private:
  std::uint64_t epoch_ = 0;
  std::uint64_t seq_ = 0;
  Dtype dtype_ = Dtype::f32;
  std::uint32_t rows_ = 0;
  std::uint32_t cols_ = 0;
  std::unique_ptr<std::byte[]> data_;  // new[]'d std::byte: suitably aligned for float (16 bytes)
};

// The header a channel sends in front of `a` as its `frame`-th frame.
ActivationHeader header_of(const Activation& a, std::uint64_t frame, std::uint32_t window);

// Writes the header's wire form (little-endian, fixed offsets) into `out`.
void encode_header(const ActivationHeader& h, std::span<std::byte, kActivationHeaderBytes> out);

// Reads and checks a header that arrived with a payload of `payload_bytes` from `peer`: size,
// magic, version, dtype, and rows x cols x sizeof(dtype) == payload_bytes (computed without
// overflow). Throws ActivationError naming the peer, the frame (when readable) and the mismatch.
ActivationHeader decode_header(std::span<const std::byte> wire, std::size_t payload_bytes,
                               std::string_view peer);

}  // namespace dype::rt::remote
