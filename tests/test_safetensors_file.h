#pragma once
// Writes safetensors files for the tests, well formed (from named float tensors) or exactly as
// given (header text and data bytes), so readers can be fed every malformation on purpose.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dype::test {

// 8-byte little-endian header length, the header text as given, then the data.
inline void write_safetensors_raw(const std::filesystem::path& path, const std::string& header,
                                  const std::vector<unsigned char>& data = {}) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xffu));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

struct F32Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// A well-formed F32 file: the tensors back to back in the order given.
inline void write_safetensors(const std::filesystem::path& path, const std::vector<F32Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<unsigned char> data;
  for (const F32Tensor& t : tensors) {
    const std::size_t begin = data.size();
    data.resize(begin + t.values.size() * 4);
    if (!t.values.empty()) std::memcpy(data.data() + begin, t.values.data(), t.values.size() * 4);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  write_safetensors_raw(path, header.dump(), data);
}

}  // namespace dype::test
