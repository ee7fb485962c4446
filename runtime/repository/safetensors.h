#pragma once
// A strict, memory-mapped safetensors reader (https://github.com/huggingface/safetensors): an
// 8-byte little-endian header length N, N bytes of JSON mapping each tensor name to its dtype,
// shape and [begin, end) byte range in the data that follows (plus an optional "__metadata__"
// map of strings). The whole header is validated before any tensor is used: the JSON, every
// entry's keys and types, shapes whose element count fits, ranges inside the data and of exactly
// the dtype's size, no two tensors overlapping, no bytes of the data left unclaimed (as the
// reference implementation requires), no name twice. Any problem is an InputError naming the file
// and, where there is one, the tensor.
//
//   rt::SafetensorsFile f = rt::SafetensorsFile::open("model.safetensors");
//   std::vector<float> w = f.to_f32("convs.0.lin.weight", {{16, 34}});  // F32, F16 or BF16
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dype::rt {

// The dtypes whose values can be read (as FP32). Other safetensors dtypes (I64, F64, U8, ...) are
// accepted in the header, sized and bounds-checked, but to_f32 refuses them.
enum class TensorDtype { f32, f16, bf16, other };
const char* to_string(TensorDtype d);

struct TensorView {
  std::string name;
  TensorDtype dtype = TensorDtype::f32;
  std::string dtype_name;            // as written: "F32", "I64", ...
  std::vector<std::int64_t> shape;   // [] is a scalar (one element)
  std::span<const std::byte> bytes;  // into the mapping
  std::int64_t elements() const;
};

class SafetensorsFile {
 public:
  // Maps the file read-only and validates the whole header; InputError naming the path (and
  // tensor) on any problem.
  static SafetensorsFile open(const std::string& path);
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  // InputError "<path>: no tensor 'x'" when absent.
  const TensorView& tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor as row-major FP32 (F16 and BF16 widened exactly). InputError when the dtype is not
  // a float, when `expect_shape` is given and differs, or at the first NaN or Inf (its flat index).
  std::vector<float> to_f32(const std::string& name,
                            std::optional<std::vector<std::int64_t>> expect_shape = std::nullopt) const;
  // A 2-D tensor of shape [rows, cols] (PyTorch's Linear weight [out, in]) widened and transposed
  // to row-major [cols, rows] in one pass, with the same checks as to_f32.
  std::vector<float> to_f32_transposed(const std::string& name, std::int64_t rows, std::int64_t cols) const;

 private:
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace dype::rt
