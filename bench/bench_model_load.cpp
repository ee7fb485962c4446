// Loading a model repository entry of ~100 MB of FP32 weights (a 2-layer GCN, 3584 -> 3584 ->
// 3584: 2 x 12.8M weights): open and validate the safetensors header, widen and transpose every
// weight into the model (measured, this machine). Also F16 and BF16 files of the same model
// (half the bytes, widened at load). Prints medians of --reps runs and the ratio to the 100 ms
// target, and the time a plain read of the file's bytes takes (the peer: no parsing at all).
//
//   ./build/release/bench/bench_model_load [--reps 7] [--width 3584]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/repository/model_repository.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Writes DIR/<name>/config.yaml and model.safetensors with every weight in `dtype`.
void write_model(const fs::path& dir, const std::string& name, std::int64_t w, const std::string& dtype) {
  const fs::path folder = dir / name;
  fs::create_directories(folder);
  std::ofstream(folder / "config.yaml") << "family: gcn\nin_features: " << w << "\nhidden: " << w << "\nlayers: 2\n";
  const std::size_t esize = dtype == "F32" ? 4 : 2;
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::pair<std::string, std::int64_t>> tensors;
  for (int l = 0; l < 2; ++l) {
    tensors.push_back({"convs." + std::to_string(l) + ".lin.weight", w * w});
    tensors.push_back({"convs." + std::to_string(l) + ".bias", w});
  }
  std::size_t off = 0;
  for (const auto& [n, count] : tensors) {
    const std::size_t bytes = static_cast<std::size_t>(count) * esize;
    header[n] = {{"dtype", dtype},
                 {"shape", count == w ? std::vector<std::int64_t>{w} : std::vector<std::int64_t>{w, w}},
                 {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  const std::string h = header.dump();
  std::ofstream out(folder / "model.safetensors", std::ios::binary);
  const std::uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h;
  std::vector<char> chunk(1 << 20);
  // Small finite values: 0x3c00 (F16 1.0) pairs, or F32 0.01 patterns.
  for (std::size_t i = 0; i < chunk.size(); i += 4) {
    const float f = 0.01f;
    if (esize == 4) std::memcpy(&chunk[i], &f, 4);
    else {
      const std::uint16_t v = dtype == "F16" ? 0x2000 : 0x3c24;
      std::memcpy(&chunk[i], &v, 2);
      std::memcpy(&chunk[i + 2], &v, 2);
    }
  }
  for (std::size_t left = off; left > 0;) {
    const std::size_t k = std::min(left, chunk.size());
    out.write(chunk.data(), static_cast<std::streamsize>(k));
    left -= k;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  std::int64_t width = 3584;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--reps") reps = std::stoi(argv[i + 1]);
    else if (k == "--width") width = std::stoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_model_load: unknown option %s (--reps, --width)\n", k.c_str());
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("dype-bench-load-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::printf("model repository load, measured on this machine (median of %d; page cache warm)\n", reps);
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    write_model(dir, "m" + dtype, width, dtype);
    const fs::path file = dir / ("m" + dtype) / "model.safetensors";
    const double mb = static_cast<double>(fs::file_size(file)) / 1e6;
    std::vector<double> load, read;
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      const dype::rt::RepositoryModel m = dype::rt::ModelRepository({dir.string()}).load("m" + dtype);
      load.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      std::ifstream in(file, std::ios::binary);
      std::vector<char> bytes(fs::file_size(file));
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      read.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double t = median(load);
    std::printf("  %-4s %6.1f MB: load %7.1f ms (%.2fx of the 100 ms target%s), plain read of the bytes %6.1f ms\n",
                dtype.c_str(), mb, t * 1e3, t / 0.1, t < 0.1 ? ", met" : ", MISSED", median(read) * 1e3);
  }
  fs::remove_all(dir);
  return 0;
}
