#pragma once
// NumPy's .npy files (format versions 1.0-3.0) for model inputs and outputs: features in, logits
// out. Read: little-endian float32 or float64 (widened/narrowed to FP32), C order, any rank; the
// header is checked completely (magic, version, header length, the dict's keys and values, data
// size) and a problem is an InputError naming the file. Written: version 1.0, '<f4', C order.
//
//   rt::NpyArray x = rt::read_npy("features.npy");     // x.shape == {34, 34}
//   rt::write_npy("logits.npy", {34, 2}, y.data);
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dype::rt {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const float> data);

}  // namespace dype::rt
