#include "runtime/remote/activation.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace dype::rt::remote {

// The wire is little-endian and so is every host dype runs on; a big-endian port would swap here.
static_assert(std::endian::native == std::endian::little, "activation wire format assumes little-endian");

namespace {

// Field offsets of the wire header. 44..47 are reserved (sent as zero, ignored on receipt, so a
// later version can use them without breaking this one's receivers).
constexpr std::size_t kMagicAt = 0, kVersionAt = 4, kDtypeAt = 6, kRowsAt = 8, kColsAt = 12,
                      kEpochAt = 16, kSeqAt = 24, kFrameAt = 32, kWindowAt = 40;

template <typename T>
void put(std::span<std::byte, kActivationHeaderBytes> out, std::size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

template <typename T>
T get(std::span<const std::byte> in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

}  // namespace

std::size_t dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::f32: return 4;
    case Dtype::u8: return 1;
  }
  return 0;
}

const char* to_string(Dtype d) {
  switch (d) {
    case Dtype::f32: return "float32";
    case Dtype::u8: return "u8";
  }
  return "unknown";
}

std::span<float> Activation::values() {
  if (dtype_ != Dtype::f32) throw std::logic_error("Activation::values on a u8 frame");
  return {reinterpret_cast<float*>(data_.get()), size()};
}

std::span<const float> Activation::values() const {
  if (dtype_ != Dtype::f32) throw std::logic_error("Activation::values on a u8 frame");
  return {reinterpret_cast<const float*>(data_.get()), size()};
}

Activation Activation::uninitialised(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows,
                                     std::uint32_t cols, Dtype dtype) {
  Activation a;
  a.epoch_ = epoch;
  a.seq_ = seq;
  a.dtype_ = dtype;
  a.rows_ = rows;
  a.cols_ = cols;
  // operator new[] aligns to __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16), enough for float.
  a.data_ = std::make_unique_for_overwrite<std::byte[]>(std::max<std::size_t>(a.payload_bytes(), 1));
  return a;
}

Activation Activation::bytes_of(std::uint64_t epoch, std::uint64_t seq, std::span<const std::byte> bytes) {
  if (bytes.size() > UINT32_MAX) throw std::invalid_argument("Activation::bytes_of: more than 4 GiB");
  Activation a = uninitialised(epoch, seq, 1, static_cast<std::uint32_t>(bytes.size()), Dtype::u8);
  std::copy(bytes.begin(), bytes.end(), a.data_.get());
  return a;
}

Activation Activation::copy_of(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows,
                               std::uint32_t cols, std::span<const float> values) {
  if (values.size() != std::size_t{rows} * cols) {
    throw std::invalid_argument("Activation::copy_of: " + std::to_string(rows) + " x " +
                                std::to_string(cols) + " needs " +
                                std::to_string(std::size_t{rows} * cols) + " values, got " +
                                std::to_string(values.size()));
  }
  Activation a = uninitialised(epoch, seq, rows, cols);
  std::copy(values.begin(), values.end(), a.values().begin());
  return a;
}

ActivationHeader header_of(const Activation& a, std::uint64_t frame, std::uint32_t window) {
  return ActivationHeader{.version = kActivationVersion,
                          .dtype = a.dtype(),
                          .rows = a.rows(),
                          .cols = a.cols(),
                          .epoch = a.epoch(),
                          .seq = a.seq(),
                          .frame = frame,
                          .window = window};
}

void encode_header(const ActivationHeader& h, std::span<std::byte, kActivationHeaderBytes> out) {
  std::fill(out.begin(), out.end(), std::byte{0});
  put(out, kMagicAt, kActivationMagic);
  put(out, kVersionAt, h.version);
  put(out, kDtypeAt, static_cast<std::uint16_t>(h.dtype));
  put(out, kRowsAt, h.rows);
  put(out, kColsAt, h.cols);
  put(out, kEpochAt, h.epoch);
  put(out, kSeqAt, h.seq);
  put(out, kFrameAt, h.frame);
  put(out, kWindowAt, h.window);
}

ActivationHeader decode_header(std::span<const std::byte> wire, std::size_t payload_bytes,
                               std::string_view peer) {
  const std::string from = "activation from " + std::string(peer);
  if (wire.size() != kActivationHeaderBytes) {
    throw ActivationError(from + ": header has " + std::to_string(wire.size()) + " bytes, expected " +
                          std::to_string(kActivationHeaderBytes) + "; refused");
  }
  if (get<std::uint32_t>(wire, kMagicAt) != kActivationMagic) {
    throw ActivationError(from + ": header does not start with the activation magic; refused");
  }
  ActivationHeader h;
  h.frame = get<std::uint64_t>(wire, kFrameAt);
  const std::string frame = from + ", frame " + std::to_string(h.frame);
  h.version = get<std::uint16_t>(wire, kVersionAt);
  if (h.version != kActivationVersion) {
    throw ActivationError(frame + ": header version " + std::to_string(h.version) +
                          ", this build reads version " + std::to_string(kActivationVersion) +
                          "; refused");
  }
  const auto dtype = get<std::uint16_t>(wire, kDtypeAt);
  h.dtype = static_cast<Dtype>(dtype);
  const std::size_t elem_bytes = dtype_bytes(h.dtype);
  if (elem_bytes == 0) {
    throw ActivationError(frame + ": unknown dtype code " + std::to_string(dtype) + "; refused");
  }
  h.rows = get<std::uint32_t>(wire, kRowsAt);
  h.cols = get<std::uint32_t>(wire, kColsAt);
  h.epoch = get<std::uint64_t>(wire, kEpochAt);
  h.seq = get<std::uint64_t>(wire, kSeqAt);
  h.window = get<std::uint32_t>(wire, kWindowAt);
  // rows x cols fits 64 bits (both are 32-bit); times the element size it may not, so compare
  // by division instead of multiplying.
  const std::uint64_t elems = std::uint64_t{h.rows} * h.cols;
  const bool matches = payload_bytes % elem_bytes == 0 && payload_bytes / elem_bytes == elems;
  if (!matches) {
    throw ActivationError(frame + " (seq " + std::to_string(h.seq) + "): header says " +
                          std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                          " " + to_string(h.dtype) + " = " + std::to_string(elems) + " values but the payload has " +
                          std::to_string(payload_bytes) + " bytes; refused");
  }
  return h;
}

}  // namespace dype::rt::remote
