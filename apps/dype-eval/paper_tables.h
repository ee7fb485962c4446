#pragma once
// The DyPe paper's published evaluation figures (configs/paper/dype-tables.yaml), which dype-eval
// prints beside its own. Loading checks every entry: a missing or malformed one is an InputError
// naming the file and the key.
#include <array>
#include <map>
#include <string>
#include <vector>

namespace dype::eval {

inline constexpr std::array<const char*, 3> kModes = {"perf", "balanced", "energy"};

struct SuboptimalFigure {
  int suboptimal = 0;
  int cases = 0;
  double loss_pct = 0.0;
};

// [throughput ratio, energy-efficiency ratio] of DyPe in one mode over one baseline.
struct Improvement {
  double throughput = 0.0;
  double efficiency = 0.0;
};

struct PaperTables {
  std::string file;
  std::string source;
  std::map<std::string, SuboptimalFigure> table3;  // "perf", "energy"
  // table4[workload][baseline][mode]: workload "gnn", "transformer", "average".
  std::map<std::string, std::map<std::string, std::map<std::string, Improvement>>> table4;
  std::vector<std::string> interconnects;  // table5 column groups: "pcie4", "pcie5", "cxl3"
  std::vector<std::string> modes;          // within each group: "perf", "balanced", "energy"
  std::map<std::string, std::vector<std::string>> table5;  // "GCN-OA" -> mnemonic per column
  int static_or_fleetrec_best = 0;

  // The paper's plan for a row, interconnect and mode; "" when the table has none.
  std::string plan(const std::string& row, const std::string& interconnect, const std::string& mode) const;
};

PaperTables load_paper_tables(const std::string& path);

}  // namespace dype::eval
