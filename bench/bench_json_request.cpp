// Parsing a ~50 MB JSON infer request (a GCN's x [N, 16] FP32 written as the doubles the floats
// widen to, and edge_index [2, 4N] INT64), in one process, two ways:
//   dype: parse_infer_request (simdjson On-Demand, data counted then parsed into the tensors' bytes)
//   nlohmann DOM: what the daemon did before: the depth pre-pass, json::parse into a document tree,
//                 then each data array counted and flattened into the tensor's bytes
// and writing a JSON response of y [N, 32] FP32 both ways (encode_infer_response's direct writer
// against a nlohmann tree of the data, dumped). Prints the median time of --reps runs, the peak RSS
// growth of one run (VmHWM after /proc/self/clear_refs, over the RSS before it) and the ratios.
// Measured on this machine; not modelled.
//
//   ./build/release/bench/bench_json_request [--reps 5] [--nodes 150000]
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/daemon/kserve/json_depth.h"
#include "runtime/daemon/kserve/tensor.h"

using namespace dype::rt::daemon;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string k;
    double kb = 0;
    s >> k >> kb;
    if (k == key) return kb * 1024;
  }
  return 0;
}

struct Run {
  double median_s = 0, peak_growth_bytes = -1;
};

// The median time of `reps` calls, and the peak RSS growth of one more.
Run measure(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  Run r{.median_s = t[t.size() / 2]};
  malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  if (clear.good()) {
    const double before = status_bytes("VmRSS:");
    f();
    r.peak_growth_bytes = status_bytes("VmHWM:") - before;
  }
  malloc_trim(0);
  return r;
}

// The old path's flatten, kept here as the peer: nested arrays to little-endian bytes.
template <typename T>
void flatten(const json& j, std::string& raw) {
  if (j.is_array()) {
    for (const json& e : j) flatten<T>(e, raw);
    return;
  }
  const T v = j.get<T>();
  raw.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::int64_t leaf_count(const json& j) {
  if (!j.is_array()) return 1;
  std::int64_t n = 0;
  for (const json& e : j) n += leaf_count(e);
  return n;
}

std::size_t parse_with_dom(const std::string& body) {
  check_json_depth(body, "request body");
  const json j = json::parse(body);
  std::size_t bytes = 0;
  for (const json& t : j["inputs"]) {
    std::string raw;
    const bool fp32 = t["datatype"] == "FP32";
    raw.reserve(static_cast<std::size_t>(leaf_count(t["data"])) * (fp32 ? 4 : 8));
    if (fp32) flatten<float>(t["data"], raw);
    else flatten<std::int64_t>(t["data"], raw);
    bytes += raw.size();
  }
  return bytes;
}

void print(const char* what, const Run& dype, const Run& peer, double body_bytes) {
  std::printf("%s\n", what);
  std::printf("  %-14s median %8.1f ms   peak RSS growth %8.1f MB (%.2fx the body)\n", "dype", dype.median_s * 1e3,
              dype.peak_growth_bytes / 1e6, dype.peak_growth_bytes / body_bytes);
  std::printf("  %-14s median %8.1f ms   peak RSS growth %8.1f MB (%.2fx the body)\n", "nlohmann DOM", peer.median_s * 1e3,
              peer.peak_growth_bytes / 1e6, peer.peak_growth_bytes / body_bytes);
  std::printf("  ratios (nlohmann / dype): time %.2fx, peak RSS growth %.1fx\n", peer.median_s / dype.median_s,
              peer.peak_growth_bytes / dype.peak_growth_bytes);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::int64_t n = 150000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--nodes") == 0) n = std::max<std::int64_t>(16, std::atoll(argv[i + 1]));
  }
  const std::int64_t e = 4 * n;
  std::vector<std::int64_t> ei(static_cast<std::size_t>(2 * e));
  for (std::int64_t k = 0; k < e; ++k) {
    ei[static_cast<std::size_t>(k)] = k % n;
    ei[static_cast<std::size_t>(e + k)] = (k * 7919 + 13) % n;
  }
  std::size_t sink = 0;
  // Features as a client's floats print (~18 characters each), then short ones (multiples of 0.25,
  // ~4 characters: the case where a document tree costs most per byte of text).
  for (const bool short_numbers : {false, true}) {
    std::vector<float> x(static_cast<std::size_t>(n * 16));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = short_numbers ? static_cast<float>(static_cast<int>((i * 2654435761u) % 17) - 8) * 0.25f
                           : static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    const std::string body =
        encode_infer_request("b", {Tensor::from_f32("x", {n, 16}, x), Tensor::from_i64("edge_index", {2, e}, ei)},
                             json::object(), false, true)
            .body;
    std::printf("%sJSON infer request: %.1f MB (x [%lld,16] FP32 with %s numbers, edge_index [2,%lld] INT64), %d runs each\n",
                short_numbers ? "\n" : "", body.size() / 1e6, static_cast<long long>(n), short_numbers ? "short" : "full-length",
                static_cast<long long>(e), reps);
    // The daemon parses bodies where they lie (its buffers leave room after them); so does this.
    std::string padded = body + std::string(kJsonReadPaddingBytes, ' ');
    const std::string_view text = std::string_view(padded).substr(0, body.size());
    const Run dype = measure(reps, [&] {
      const InferRequest r = parse_infer_request(text, std::nullopt, false, kJsonReadPaddingBytes);
      sink += r.inputs[0].raw.size() + r.inputs[1].raw.size();
    });
    const Run dom = measure(reps, [&] { sink += parse_with_dom(body); });
    print("parse (request)", dype, dom, static_cast<double>(body.size()));
    std::printf("  dype parses %.0f MB/s, nlohmann DOM %.0f MB/s\n", body.size() / dype.median_s / 1e6,
                body.size() / dom.median_s / 1e6);
  }

  std::vector<float> y(static_cast<std::size_t>(n * 32));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::sin(static_cast<float>(i) * 0.01f);
  const Tensor yt = Tensor::from_f32("y", {n, 32}, y);
  std::size_t json_bytes = 0;
  const Run write = measure(reps, [&] {
    const EncodedBody b = encode_infer_response({.model_name = "gcn", .id = "b"}, {yt}, {false}, std::size_t{1} << 40);
    json_bytes = b.body.size();
  });
  const Run write_dom = measure(reps, [&] {
    json o = {{"name", "y"}, {"datatype", "FP32"}, {"shape", yt.shape}, {"data", yt.f32()}};
    const json h = {{"id", "b"}, {"model_name", "gcn"}, {"model_version", "1"}, {"outputs", json::array({std::move(o)})}};
    sink += h.dump().size();
  });
  std::printf("\n");
  print(("write JSON response (y [" + std::to_string(n) + ",32] FP32, " + std::to_string(json_bytes / 1000000) + " MB)").c_str(),
        write, write_dom, static_cast<double>(json_bytes));
  return sink == 0 ? 1 : 0;
}
