#pragma once
// Multi-host dype-serve tests (test_dype_serve_hosts, test_dype_serve_join): device lines of the
// system files, and one GCN or GIN request over HTTP with the CPU reference's answer.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/daemon/engine_service.h"
#include "runtime/model.h"

namespace dype::test::hosts {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline std::string device_line(const std::string& name, const std::string& kind, const std::string& host, int socket) {
  const std::string dir = std::string(DYPE_SOURCE_DIR) + "/configs";
  std::string y = "  - {name: " + name + ", backend: emu, socket: " + std::to_string(socket) + ", p2p: true";
  if (kind == "gpu") y += ", model: " + dir + "/devices/amd-mi210.yaml";
  else y += ", model: " + dir + "/devices/xilinx-u280.yaml, bitstream: " + dir + "/bitstreams/u280-sextans-gemm.yaml";
  if (!host.empty()) y += ", host: " + host;
  return y + "}\n";
}

inline std::string cpu_line(bool schedulable = false) {
  return "  - {name: cpu0, backend: cpu, model: " + std::string(DYPE_SOURCE_DIR) +
         "/configs/devices/generic-cpu.yaml, socket: 0, schedulable: " + std::string(schedulable ? "true" : "false") + ", threads: 1}\n";
}

inline void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// Why these tests cannot run in this build, or null: ThreadSanitizer builds of dype-serve have no
// remote stages (UCX is left out: libucm crashes TSan binaries).
#if defined(__SANITIZE_THREAD__)
inline constexpr const char* kNoRemoteStages =
    "ThreadSanitizer build: dype-serve has no remote stages there (UCX is left out: libucm crashes TSan binaries)";
#else
inline constexpr const char* kNoRemoteStages = nullptr;
#endif

// The workers' system files in `dir`: a.yaml (two emulated MI210s), b.yaml (two emulated U280s
// with the SpMM + GEMM image), each with a CPU that plans nothing.
inline void write_worker_systems(const fs::path& dir) {
  const std::string head = "system: {name: part}\ntopology: {sockets: 2}\ndevices:\n";
  write(dir / "a.yaml", head + cpu_line() + device_line("gpu0", "gpu", "", 0) + device_line("gpu1", "gpu", "", 0));
  write(dir / "b.yaml", head + cpu_line() + device_line("fpga0", "fpga", "", 1) + device_line("fpga1", "fpga", "", 1));
}

// The stage requests a worker's log says it served (written when it stops); -1 before that.
inline std::int64_t stage_requests_served(const std::string& log_text) {
  const auto at = log_text.find("stage server: ");
  if (at == std::string::npos) return -1;
  return std::stoll(log_text.substr(log_text.find(" links, ", at) + 8));
}

// One GCN or GIN request over HTTP on a seeded graph, and the CPU reference's answer.
struct GnnCase {
  dype::rt::Model model;
  json body;
  dype::rt::HostTensor expect;
};

inline GnnCase gnn_case(const std::string& name, std::uint64_t seed) {
  const auto served = dype::rt::daemon::default_models();
  const auto it = std::find_if(served.begin(), served.end(), [&](const auto& m) { return m.name == name; });
  dype::rt::Model m = dype::rt::Model::make(it->spec);
  const std::int64_t n = 300, e = 1500, f = m.spec().in_features;
  const auto edges = dype::rt::random_graph(n, e, seed);
  std::vector<std::int64_t> edge_index = edges.src;
  edge_index.insert(edge_index.end(), edges.dst.begin(), edges.dst.end());
  std::vector<float> x(static_cast<std::size_t>(n * f));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u + seed) % 1000) / 500.0f - 1.0f;
  json body = {{"inputs",
                {{{"name", "x"}, {"shape", {n, f}}, {"datatype", "FP32"}, {"data", x}},
                 {{"name", "edge_index"}, {"shape", {2, e}}, {"datatype", "INT64"}, {"data", edge_index}}}}};
  auto expect = dype::rt::reference_forward(
      m, dype::rt::Request::gnn(dype::rt::graph_for_model(edges, m.spec()), dype::rt::make_tensor(n, f, x)));
  return {std::move(m), std::move(body), std::move(expect)};
}

inline dype::rt::HostTensor output_of(const std::string& body) {
  const json out = json::parse(body)["outputs"][0];
  return dype::rt::make_tensor(out["shape"][0], out["shape"][1], out["data"].get<std::vector<float>>());
}

}  // namespace dype::test::hosts
