#include "runtime/daemon/grpc/grpc_wire.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "runtime/daemon/kserve/finite_check.h"
#include "runtime/daemon/proto/grpc_service.pb.h"
#include "runtime/host_buffer_pool.h"

namespace dype::rt::daemon {
namespace {

namespace pb = inference;

// Protobuf's wire format (protobuf.dev/programming-guides/encoding): a field is a varint key
// (number << 3 | wire type) and its value.
enum Wire : std::uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };
constexpr std::uint32_t kRawInputContents = 7;   // ModelInferRequest.raw_input_contents
constexpr std::uint32_t kRawOutputContents = 6;  // ModelInferResponse.raw_output_contents
constexpr std::uint32_t kStreamError = 1;        // ModelStreamInferResponse.error_message
constexpr std::uint32_t kStreamResponse = 2;     // ModelStreamInferResponse.infer_response

InputError malformed(const std::string& what, std::size_t at) {
  return InputError("request",
                    "is not a ModelInferRequest: " + what + " at byte " + std::to_string(at));
}

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Reads a ByteBuffer's slices in order without joining them.
class SliceReader {
 public:
  explicit SliceReader(const grpc::ByteBuffer& bytes) {
    if (!bytes.Valid()) return;
    if (!bytes.Dump(&slices_).ok())
      throw InputError("request", "could not be read from gRPC's buffer");
    for (const grpc::Slice& s : slices_) left_ += s.size();
    skip_empty();
  }
  std::size_t left() const { return left_; }
  std::size_t at() const { return at_; }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    const std::size_t start = at_;
    for (int shift = 0; shift < 64; shift += 7) {
      if (left_ == 0) throw malformed("a varint cut short", start);
      const auto b = static_cast<std::uint8_t>(*chunk());
      advance(1);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw malformed("a varint longer than 10 bytes", start);
  }
  // A length-delimited value's length, checked against what is left.
  std::size_t length() {
    const std::size_t start = at_;
    const std::uint64_t n = varint();
    if (n > left_)
      throw malformed(
          "a field of " + std::to_string(n) + " bytes with " + std::to_string(left_) + " left",
          start);
    return static_cast<std::size_t>(n);
  }
  // Hands the next n bytes over as they lie, one slice's part at a time (a block): f(bytes, offset
  // in the n, size).
  template <typename F>
  void each_block(std::size_t n, F&& f) {
    if (n > left_)
      throw malformed(std::to_string(n) + " bytes wanted, " + std::to_string(left_) + " left", at_);
    std::size_t done = 0;
    while (done < n) {
      const std::size_t k = std::min(n - done, available());
      f(reinterpret_cast<const std::byte*>(chunk()), done, k);
      advance(k);
      done += k;
    }
  }
  void copy(std::byte* dst, std::size_t n) {
    each_block(n, [&](const std::byte* src, std::size_t at, std::size_t k) {
      std::memcpy(dst + at, src, k);
    });
  }
  void append(std::string& out, std::size_t n) {
    const std::size_t old = out.size();
    out.resize(old + n);
    copy(reinterpret_cast<std::byte*>(out.data() + old), n);
  }

 private:
  const char* chunk() const { return reinterpret_cast<const char*>(slices_[i_].begin()) + pos_; }
  std::size_t available() const { return slices_[i_].size() - pos_; }
  void advance(std::size_t k) {
    pos_ += k;
    at_ += k;
    left_ -= k;
    skip_empty();
  }
  void skip_empty() {
    while (i_ < slices_.size() && pos_ == slices_[i_].size()) {
      ++i_;
      pos_ = 0;
    }
  }
  std::vector<grpc::Slice> slices_;
  std::size_t i_ = 0, pos_ = 0, left_ = 0, at_ = 0;
};

// One raw_input_contents entry: copied into aligned memory of its own, checked as FP32 on the way.
ReceivedContents::Entry receive_entry(SliceReader& in, std::size_t n) {
  ReceivedContents::Entry e;
  e.size = n;
  e.finite_f32 = n % 4 == 0;
  if (n == 0) return e;
  // A large entry comes from the receive pool: kept for the next request, and pinned where a GPU
  // backend can pin, so a GPU stage uploads it by one DMA (runtime/host_buffer_pool.h).
  e.data = receive_buffers().acquire(n);
  std::byte* dst = e.data.get();
  // The values wholly inside a block are copied and checked in one pass (copy_all_finite_f32); the
  // bytes of a value cut by a block's edge are copied plainly and the value checked once whole.
  // Invariant: after each block, the values before `scanned` (its end, rounded down) are checked.
  std::size_t scanned = 0;
  bool bad = false;
  in.each_block(n, [&](const std::byte* src, std::size_t at, std::size_t k) {
    const std::size_t end = at + k, first = (at + 3) / 4 * 4, last = end / 4 * 4;
    if (first >= last) {  // no whole value in this block
      std::memcpy(dst + at, src, k);
      bad |= !all_finite_f32(dst + scanned, (last - scanned) / 4);
    } else {
      std::memcpy(dst + at, src, first - at);
      bad |= !all_finite_f32(dst + scanned, (first - scanned) / 4);
      bad |= !copy_all_finite_f32(dst + first, src + (first - at), (last - first) / 4);
      std::memcpy(dst + last, src + (last - at), end - last);
    }
    scanned = std::max(scanned, last);
  });
  if (bad) e.finite_f32 = false;
  return e;
}

// Holds the answer's memory for as long as gRPC refers to one slice of it.
struct SliceKeep {
  std::shared_ptr<const void> keep;
};

// `head` (serialised fields), then each raw entry as field `field` of the same message: the
// entries' keys and lengths in small slices of their own, their bytes as slices of the caller's
// memory.
void append_framed(std::vector<grpc::Slice>& slices, std::string head, std::uint32_t field,
                   const std::vector<std::string_view>& raw,
                   const std::shared_ptr<const void>& keep) {
  constexpr std::size_t kInline = 4096;  // smaller entries are copied into the framing instead
  for (std::string_view v : raw) {
    put_varint(head, field << 3 | kLen);
    put_varint(head, v.size());
    if (v.size() < kInline) {
      head.append(v);
      continue;
    }
    slices.emplace_back(head);
    head.clear();
    slices.emplace_back(
        const_cast<char*>(v.data()), v.size(), [](void* k) { delete static_cast<SliceKeep*>(k); },
        new SliceKeep{keep});
  }
  if (!head.empty()) slices.emplace_back(head);
}

std::size_t framed_size(std::size_t head, std::uint32_t field,
                        const std::vector<std::string_view>& raw) {
  std::size_t n = head;
  for (std::string_view v : raw)
    n += varint_size(field << 3 | kLen) + varint_size(v.size()) + v.size();
  return n;
}

void check_no_raw(const pb::ModelInferResponse& r) {
  if (r.raw_output_contents_size() != 0)
    throw Error("frame_infer_response: the response already carries raw_output_contents");
}

}  // namespace

bool ReceivedContents::known_finite_f32(const void* data, std::size_t bytes) const {
  for (const Entry& e : entries)
    if (e.data.get() == data && e.size == bytes) return e.finite_f32;
  return false;
}

void parse_infer_request(const grpc::ByteBuffer& bytes, pb::ModelInferRequest& header,
                         ReceivedContents& raw) {
  SliceReader in(bytes);
  std::string fields;  // every field but raw_input_contents, as they came
  while (in.left() > 0) {
    const std::size_t start = in.at();
    const std::uint64_t key = in.varint();
    const std::uint64_t number = key >> 3;
    const auto wire = static_cast<std::uint32_t>(key & 7);
    if (number == 0 || number > 0x1fffffff)
      throw malformed("field number " + std::to_string(number), start);
    if (number == kRawInputContents && wire == kLen) {
      raw.entries.push_back(receive_entry(in, in.length()));
      continue;
    }
    put_varint(fields, key);
    switch (wire) {
      case kVarint:
        put_varint(fields, in.varint());
        break;
      case kFixed64:
        in.append(fields, 8);
        break;
      case kFixed32:
        in.append(fields, 4);
        break;
      case kLen: {
        const std::size_t n = in.length();
        put_varint(fields, n);
        in.append(fields, n);
        break;
      }
      default:
        throw malformed(
            "wire type " + std::to_string(wire) + " (field " + std::to_string(number) + ")", start);
    }
  }
  if (!header.ParseFromString(fields))
    throw InputError("request", "is not a ModelInferRequest: protobuf could not parse its fields");
}

std::vector<std::string_view> entry_views(const ReceivedContents& raw) {
  std::vector<std::string_view> v;
  v.reserve(raw.entries.size());
  for (const ReceivedContents::Entry& e : raw.entries)
    v.emplace_back(e.size ? reinterpret_cast<const char*>(e.data.get()) : "", e.size);
  return v;
}

grpc::ByteBuffer frame_infer_response(const pb::ModelInferResponse& response,
                                      const std::vector<std::string_view>& raw,
                                      std::shared_ptr<const void> keep) {
  check_no_raw(response);
  std::vector<grpc::Slice> slices;
  append_framed(slices, response.SerializeAsString(), kRawOutputContents, raw, keep);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer frame_stream_response(const pb::ModelStreamInferResponse& response,
                                       const std::vector<std::string_view>& raw,
                                       std::shared_ptr<const void> keep) {
  std::string head;
  if (!response.error_message().empty()) {
    put_varint(head, kStreamError << 3 | kLen);
    put_varint(head, response.error_message().size());
    head.append(response.error_message());
  }
  std::vector<grpc::Slice> slices;
  if (response.has_infer_response() || !raw.empty()) {
    check_no_raw(response.infer_response());
    const std::string inner = response.infer_response().SerializeAsString();
    put_varint(head, kStreamResponse << 3 | kLen);
    put_varint(head, framed_size(inner.size(), kRawOutputContents, raw));
    append_framed(slices, head + inner, kRawOutputContents, raw, keep);
  } else if (!head.empty()) {
    slices.emplace_back(head);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace dype::rt::daemon
