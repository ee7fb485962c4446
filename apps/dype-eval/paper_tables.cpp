#include "paper_tables.h"

#include <algorithm>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "common/error.h"

namespace dype::eval {

namespace {

struct Reader {
  std::string file;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw InputError(file + ": " + key, problem);
  }
  YAML::Node child(const YAML::Node& parent, const std::string& key, const std::string& path) const {
    const YAML::Node n = parent[key];
    if (!n) fail(path.empty() ? key : path + "." + key, "missing");
    return n;
  }
  double number(const YAML::Node& n, const std::string& path) const {
    try {
      return n.as<double>();
    } catch (const YAML::Exception&) {
      fail(path, "must be a number");
    }
  }
  std::vector<std::string> strings(const YAML::Node& n, const std::string& path) const {
    if (!n.IsSequence()) fail(path, "must be a list");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) fail(path + "[" + std::to_string(i) + "]", "must be a string");
      out.push_back(n[i].as<std::string>());
    }
    return out;
  }
};

}  // namespace

std::string PaperTables::plan(const std::string& row, const std::string& interconnect, const std::string& mode) const {
  const auto it = table5.find(row);
  const auto ic = std::find(interconnects.begin(), interconnects.end(), interconnect);
  const auto m = std::find(modes.begin(), modes.end(), mode);
  if (it == table5.end() || ic == interconnects.end() || m == modes.end()) return "";
  const std::size_t col = static_cast<std::size_t>(ic - interconnects.begin()) * modes.size() +
                          static_cast<std::size_t>(m - modes.begin());
  return col < it->second.size() ? it->second[col] : "";
}

PaperTables load_paper_tables(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw InputError("--paper", "no paper table file at '" + path + "'");
  const Reader r{path};
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    r.fail("(file)", std::string("not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) r.fail("(file)", "must be a mapping with table3, table4 and table5");
  PaperTables t;
  t.file = path;
  if (root["source"]) t.source = root["source"].as<std::string>();

  const YAML::Node t3 = r.child(root, "table3", "");
  for (const char* mode : {"perf", "energy"}) {
    const std::string p = std::string("table3.") + mode;
    const YAML::Node e = r.child(t3, mode, "table3");
    SuboptimalFigure f;
    f.suboptimal = static_cast<int>(r.number(r.child(e, "suboptimal", p), p + ".suboptimal"));
    f.cases = static_cast<int>(r.number(r.child(e, "cases", p), p + ".cases"));
    f.loss_pct = r.number(r.child(e, "loss_pct", p), p + ".loss_pct");
    if (f.cases <= 0 || f.suboptimal < 0 || f.suboptimal > f.cases) r.fail(p, "needs 0 <= suboptimal <= cases, cases > 0");
    t.table3[mode] = f;
  }

  const YAML::Node t4 = r.child(root, "table4", "");
  if (!t4.IsMap()) r.fail("table4", "must be a mapping of workloads");
  for (const auto& wl : t4) {
    const std::string w = wl.first.as<std::string>();
    if (!wl.second.IsMap() || wl.second.size() == 0) r.fail("table4." + w, "must be a mapping of baselines");
    for (const auto& bl : wl.second) {
      const std::string b = bl.first.as<std::string>();
      const std::string p = "table4." + w + "." + b;
      for (const char* mode : kModes) {
        const YAML::Node pair = r.child(bl.second, mode, p);
        if (!pair.IsSequence() || pair.size() != 2) r.fail(p + "." + mode, "must be [throughput ratio, efficiency ratio]");
        const Improvement imp{r.number(pair[0], p + "." + mode + "[0]"), r.number(pair[1], p + "." + mode + "[1]")};
        if (!(imp.throughput > 0 && imp.efficiency > 0)) r.fail(p + "." + mode, "ratios must be > 0");
        t.table4[w][b][mode] = imp;
      }
    }
  }
  for (const char* w : {"gnn", "transformer"})
    if (!t.table4.contains(w)) r.fail(std::string("table4.") + w, "missing");

  const YAML::Node t5 = r.child(root, "table5", "");
  t.interconnects = r.strings(r.child(t5, "interconnects", "table5"), "table5.interconnects");
  t.modes = r.strings(r.child(t5, "modes", "table5"), "table5.modes");
  const YAML::Node plans = r.child(t5, "plans", "table5");
  if (!plans.IsMap()) r.fail("table5.plans", "must be a mapping of rows (GCN-OA: [...])");
  const std::size_t columns = t.interconnects.size() * t.modes.size();
  for (const auto& row : plans) {
    const std::string name = row.first.as<std::string>();
    auto cells = r.strings(row.second, "table5.plans." + name);
    if (cells.size() != columns)
      r.fail("table5.plans." + name, "has " + std::to_string(cells.size()) + " plans, expected " + std::to_string(columns) +
                                         " (interconnects x modes)");
    t.table5[name] = std::move(cells);
  }
  if (t5["static_or_fleetrec_best"])
    t.static_or_fleetrec_best = static_cast<int>(r.number(t5["static_or_fleetrec_best"], "table5.static_or_fleetrec_best"));
  return t;
}

}  // namespace dype::eval
