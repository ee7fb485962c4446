#include "workload.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/error.h"
#include "graph/generators.h"
#include "graph/mtx_reader.h"
#include "graph/snap_reader.h"

namespace dype::client {

namespace fs = std::filesystem;

std::vector<PhaseSpec> drift_phases(const std::string& drift, bool transformer, std::uint64_t seed) {
  std::vector<PhaseSpec> phases;
  std::stringstream ss(drift);
  for (std::string item; std::getline(ss, item, ',');) {
    PhaseSpec p;
    long a = 0, b = 0;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%d:%ldx%ld%c", &p.at, &a, &b, &tail) != 3)
      throw InputError("--drift '" + item + "'", "expected at_request:AxB");
    if (a <= 0 || b < 0) throw InputError("--drift '" + item + "'", "sizes must be positive");
    if (!phases.empty() && p.at <= phases.back().at)
      throw InputError("--drift '" + item + "'", "phase starts must increase");
    if (transformer) {
      p.seq_len = a;
      p.window = b;
      p.source = "generated " + std::to_string(a) + " tokens, window " + std::to_string(b);
    } else {
      p.graph = kernels::generate_uniform(a, b, seed + phases.size());
      p.source = "generated " + std::to_string(a) + " nodes, " + std::to_string(p.graph.num_edges()) + " edges";
    }
    phases.push_back(std::move(p));
  }
  if (phases.empty() || phases[0].at != 0) throw InputError("--drift", "the first phase must start at request 0");
  return phases;
}

kernels::EdgeList read_graph_file(const fs::path& path) {
  if (path.extension() == ".mtx") return kernels::read_mtx(path);
  return kernels::read_snap(path).edges;
}

std::vector<PhaseSpec> directory_phases(const fs::path& dir, int per_file) {
  if (per_file <= 0) throw InputError("--per-file", "must be at least 1, got " + std::to_string(per_file));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError("--dir " + dir.string(), "not a directory");
  static const char* kExt[] = {".mtx", ".txt", ".edges", ".el", ".tsv"};
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (std::find(std::begin(kExt), std::end(kExt), ext) != std::end(kExt)) files.push_back(e.path());
  }
  if (files.empty())
    throw InputError("--dir " + dir.string(), "holds no graph file (.mtx, or SNAP .txt/.edges/.el/.tsv)");
  std::sort(files.begin(), files.end());
  std::vector<PhaseSpec> phases;
  for (const fs::path& f : files) {
    PhaseSpec p;
    p.at = static_cast<int>(phases.size()) * per_file;
    p.graph = read_graph_file(f);
    p.source = f.filename().string() + " (" + std::to_string(p.graph.num_nodes) + " nodes, " +
               std::to_string(p.graph.num_edges()) + " edges)";
    phases.push_back(std::move(p));
  }
  return phases;
}

}  // namespace dype::client
