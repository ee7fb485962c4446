// dype-schedule: plans one pipeline for a model, an input and a system, and says why.
//
//   dype-schedule --system configs/systems/paper-testbed-pcie4.yaml --model configs/models/gcn.yaml
//       --dataset S1 --mode balanced --explain
//   dype-schedule --system ... --model configs/models/swin-transformer.yaml --seq-len 8192
//       --window 1024 --mode perf --json
//   dype-schedule --system ... --model ... --graph g.mtx --features 128 --baseline static
//
// Prints the plan as the paper's mnemonic (3F2G) with each stage's kernels, device kind and count,
// compute / transfer-in / transfer-out times, then period, throughput, latency and energy per
// inference (all modelled by the cost model) and the solve time (measured). Exit status: 0 plan
// printed, 2 bad input, 3 the objective's constraints cannot be met.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "graph/characteristics.h"
#include "graph/generators.h"
#include "graph/mtx_reader.h"
#include "graph/snap_reader.h"
#include "hw/system_config.h"
#include "runtime/planning/planning_case.h"
#include "scheduler/baselines.h"
#include "scheduler/cost_tables.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"
#include "scheduler/solver/format.h"
#include "scheduler/solver/lower_bound.h"

namespace {

using namespace dype;
using nlohmann::json;

struct Options {
  std::string system_file, model_file, graph_file, dataset;
  std::int64_t nodes = 0, edges = 0, features = 0, seq_len = 0, window = 0;
  // The counts as typed: parsed by count_flag, so an out-of-range number is an error, not clamped.
  std::string nodes_arg, edges_arg, features_arg, seq_len_arg, window_arg;
  double skew = 0.0;  // 0: not given (taken from the graph where there is one)
  bool skew_given = false, min_throughput_given = false, max_latency_given = false;
  std::string mode = "perf", solver = "exact", baseline, dump_tables, shapes = "all", images = "choose";
  std::string cost_model = "runtime";
  std::string transfers;  // "" = as the system file says
  double reload_horizon = 1000;
  std::string perfmodels = std::string(DYPE_SOURCE_DIR) + "/configs/perfmodels";
  bool perfmodels_given = false;
  double ratio = 0.7, min_throughput = 0.0, max_latency = 0.0;
  bool pareto = false, explain = false, as_json = false, bound = false;
};

std::string ms(double s) {
  if (!(s < sched::kInf)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", s * 1e3);
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A count flag's value: a whole number in [0, 2^53] (exact as a double in the cost model); an
// empty string (flag not given) is 0.
std::int64_t count_flag(const std::string& flag, const std::string& text) {
  if (text.empty()) return 0;
  constexpr std::int64_t kMax = std::int64_t{1} << 53;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == text.data() + text.size() && v > kMax))
    throw InputError(flag, "'" + text + "' is too large (at most 2^53 = " + std::to_string(kMax) + ")");
  if (ec != std::errc() || end != text.data() + text.size())
    throw InputError(flag, "must be a whole number, got '" + text + "'");
  if (v < 0) throw InputError(flag, "must be >= 0, got " + text);
  return v;
}

// Checks the flags that have no meaning outside a range before anything is planned: the counts,
// the degree skew (max / mean row nnz is finite and at least 1), at most nodes^2 edges, and qos
// targets that are given and positive.
void check_flags(Options& o) {
  o.nodes = count_flag("--nodes", o.nodes_arg);
  o.edges = count_flag("--edges", o.edges_arg);
  o.features = count_flag("--features", o.features_arg);
  o.seq_len = count_flag("--seq-len", o.seq_len_arg);
  o.window = count_flag("--window", o.window_arg);
  if (o.skew_given && !(std::isfinite(o.skew) && o.skew >= 1.0))
    throw InputError("--skew", "must be a finite number >= 1 (max row nnz / mean row nnz), got " + num(o.skew));
  if (o.edges > 0 && o.nodes == 0) throw InputError("--edges", "needs --nodes");
  if (o.nodes > 0 && static_cast<long double>(o.edges) > static_cast<long double>(o.nodes) * o.nodes)
    throw InputError("--edges", std::to_string(o.edges) + " is more than nodes^2 = " +
                                    num(static_cast<double>(o.nodes) * static_cast<double>(o.nodes)) + " possible entries");
  if (o.min_throughput_given && !(std::isfinite(o.min_throughput) && o.min_throughput > 0.0))
    throw InputError("--min-throughput", "must be a finite number > 0 inferences/s, got " + num(o.min_throughput));
  if (o.max_latency_given && !(std::isfinite(o.max_latency) && o.max_latency > 0.0))
    throw InputError("--max-latency", "must be a finite number > 0 seconds, got " + num(o.max_latency));
  if (!(std::isfinite(o.reload_horizon) && o.reload_horizon > 0.0))
    throw InputError("--reload-horizon", "must be a finite number of requests > 0, got " + num(o.reload_horizon));
  if (o.mode == "qos" && !o.min_throughput_given && !o.max_latency_given)
    throw InputError("--mode qos", "needs a target: --min-throughput and/or --max-latency");
}

// The input's characteristics from whichever of --graph / --dataset / explicit numbers was given.
sched::InputCharacteristics characteristics(const Options& o, std::string& described) {
  sched::InputCharacteristics in;
  const bool explicit_graph = o.nodes > 0 || o.edges > 0;
  const int sources = (o.graph_file.empty() ? 0 : 1) + (o.dataset.empty() ? 0 : 1) + (explicit_graph ? 1 : 0);
  if (sources > 1) throw InputError("--graph/--dataset/--nodes", "give the graph one way only");
  in.feature_len = o.features;
  in.seq_len = o.seq_len;
  in.window = o.window;
  in.degree_skew = o.skew;
  if (!o.graph_file.empty()) {
    const std::filesystem::path p(o.graph_file);
    kernels::EdgeList edges = p.extension() == ".mtx" ? kernels::read_mtx(p) : kernels::read_snap(p).edges;
    const kernels::GraphCharacteristics c = kernels::characterize(edges);
    in.nodes = c.nodes;
    in.nnz = c.nnz;
    if (in.degree_skew == 0.0) in.degree_skew = c.degree_skew;
    described = o.graph_file + ": " + std::to_string(c.nodes) + " nodes, " + std::to_string(c.nnz) +
                " nnz, degree skew " + num(c.degree_skew);
  } else if (!o.dataset.empty()) {
    const auto ds = kernels::paper_dataset_from_string(o.dataset);
    if (!ds) throw InputError("--dataset", "unknown dataset '" + o.dataset + "' (S1..S4, ogbn-arxiv, ogbn-products)");
    const kernels::GraphShape shape = kernels::paper_shape(*ds);
    in.nodes = shape.nodes;
    in.nnz = shape.edges;
    if (in.feature_len == 0) in.feature_len = shape.feature_len;
    described = "dataset " + shape.name + " (paper Table I): " + std::to_string(shape.nodes) + " nodes, " +
                std::to_string(shape.edges) + " edges, " + std::to_string(in.feature_len) + " features";
  } else if (explicit_graph) {
    in.nodes = o.nodes;
    in.nnz = o.edges;
    described = std::to_string(o.nodes) + " nodes, " + std::to_string(o.edges) + " nnz";
  }
  if (in.seq_len > 0) {
    described += (described.empty() ? "" : ", ") + std::string("seq_len ") + std::to_string(in.seq_len) +
                 ", window " + std::to_string(in.window);
  } else if (in.feature_len > 0 && o.dataset.empty()) {
    described += ", " + std::to_string(in.feature_len) + " features";
  }
  return in;
}

std::string kernel_range(const sched::Workload& wl, const sched::Stage& st) {
  const std::string& a = wl.kernels[st.first].name;
  if (st.first == st.last) return a;
  return a + " .. " + wl.kernels[st.last].name + " (" + std::to_string(st.last - st.first + 1) + ")";
}

json plan_json(const sched::Plan& plan, const sched::Workload& wl) {
  json j = sched::to_json(plan);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    json names = json::array();
    for (int k = plan.stages[s].first; k <= plan.stages[s].last; ++k) names.push_back(wl.kernels[k].name);
    j["stages"][s]["kernel_names"] = names;
  }
  return j;
}

// The solver's passes in the order they ran (numbered as in scheduler/solver/exact.cpp, paper.cpp),
// each with how it searched and what it found.
void print_passes(const sched::Plan& plan) {
  std::printf("solver passes (%s), in the order they ran:\n", plan.solver.c_str());
  for (const sched::SolverPass& p : plan.passes) {
    const std::string found = p.found ? "period " + ms(p.period_s) + " ms, " + num(p.energy_j) + " J/inference"
                                      : std::string("no plan");
    std::printf("  pass %d  %-46s %-13s %-24s %s\n", p.number, p.name.c_str(), p.method.c_str(), p.work.c_str(),
                found.c_str());
  }
}

void print_plan(const sched::Plan& plan, const sched::Workload& wl, bool explain) {
  std::printf("plan %s  (objective %s, solver %s, solved in %s us)\n", plan.mnemonic.c_str(),
              plan.objective.c_str(), plan.solver.c_str(), num(plan.solve_time_s * 1e6).c_str());
  if (!plan.note.empty()) std::printf("  note: %s\n", plan.note.c_str());
  if (!plan.stages.empty() && plan.stages.front().overlap)
    std::printf("  transfers overlap compute: a stage takes the largest of its kernels, its inbound copies with\n"
                "  xfer_in and its outbound copies with xfer_out (one copy engine per direction)\n");
  int kind_w = 5;  // "host:kind" on a multi-host system
  for (const sched::Stage& st : plan.stages) kind_w = std::max(kind_w, static_cast<int>(plan.where(st.kind).size()));
  std::printf("  %-5s %-34s %-*s %5s %11s %11s %12s %10s\n", "stage", "kernels", kind_w, "kind", "count",
              "compute_ms", "xfer_in_ms", "xfer_out_ms", "stage_ms");
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const sched::Stage& st = plan.stages[s];
    std::printf("  %-5zu %-34s %-*s %5d %11s %11s %12s %10s\n", s + 1, kernel_range(wl, st).c_str(), kind_w,
                plan.where(st.kind).c_str(), st.count, ms(st.compute_s).c_str(),
                ms(st.transfer_in_s).c_str(), ms(st.transfer_out_s).c_str(), ms(st.time_s()).c_str());
      if (explain && st.overlap)
        std::printf("        overlap: kernels %s ms (with the exchanges they wait for), inbound %s ms (copies %s%s), "
                    "outbound %s ms (copies %s%s)\n",
                    ms(st.kernels_s()).c_str(), ms(st.inbound_s()).c_str(), ms(st.copy_in_s).c_str(),
                    st.stall_s > st.transfer_in_s + st.copy_in_s ? ", the input waits for the first exchange" : "",
                    ms(st.outbound_s()).c_str(), ms(st.copy_out_s).c_str(),
                    st.blocked_s > st.copy_out_s ? ", the kernels after the first exchange wait for the last output" : "");
      if (explain && !st.why.empty()) std::printf("        why: %s\n", st.why.c_str());
  }
  if (plan.rounds > 1) {
    std::printf("  layer-recurrent: every request makes %d rounds through these stages (kernels named for round 0;\n"
                "  times are per request, summed over the rounds; stage 1 receives and stage %zu sends the hand-off\n"
                "  between rounds)\n",
                plan.rounds, plan.stages.size());
  }
  std::printf("  period %s ms, throughput %s inferences/s, latency %s ms, energy %s J/inference, "
              "%d devices (modelled)\n",
              ms(plan.period_s).c_str(), num(plan.throughput_per_s).c_str(), ms(plan.latency_s).c_str(),
              num(plan.energy_j).c_str(), plan.devices_used);
  if (explain && !plan.passes.empty()) print_passes(plan);
}

// Where the memory constraint ruled a (kind, count) out: the kernels that alone do not fit one of
// its devices, and the whole chain, each with the shortfall.
void print_memory(const sched::CostTables& t, const sched::Workload& wl) {
  if (!t.memory_limited()) return;
  std::printf("memory (modelled footprint per device: weights, graph rows, activations of 2 requests in flight):\n");
  const int n = t.num_kernels();
  for (int kc = 0; kc < t.num_kc(); ++kc) {
    const auto g = t.group(kc);
    const std::string group = std::to_string(g.count) + " x " + t.kind_name(g.kind);
    for (int k = 0; k < n; ++k) {
      if (t.memory_shortfall(k, k, kc) > 0)
        std::printf("  %s: %s alone does not fit, short by %s GB a device\n", group.c_str(), wl.kernels[k].name.c_str(),
                    num(t.memory_shortfall(k, k, kc) / 1e9).c_str());
    }
    if (t.memory_shortfall(0, n - 1, kc) > 0)
      std::printf("  %s: the whole model does not fit, short by %s GB a device\n", group.c_str(),
                  num(t.memory_shortfall(0, n - 1, kc) / 1e9).c_str());
  }
}

// The one-kernel rows of the cost tables (each kernel alone on each (kind, count)), and the
// output sizes that drive transfer costs. The full tables: --dump-tables.
void print_tables(const sched::CostTables& t, const sched::Workload& wl) {
  std::printf("cost tables (modelled): one-kernel compute time in ms per (kind, count); '-' = unsupported, "
              "'mem' = does not fit the device's memory\n");
  std::printf("  %-22s", "kernel");
  for (int kc = 0; kc < t.num_kc(); ++kc) {
    const auto g = t.group(kc);
    std::printf(" %8s", (std::to_string(g.count) + t.letter(g.kind)).c_str());
  }
  std::printf(" %10s\n", "out_MB");
  for (int k = 0; k < t.num_kernels(); ++k) {
    std::printf("  %-22s", wl.kernels[k].name.c_str());
    for (int kc = 0; kc < t.num_kc(); ++kc)
      std::printf(" %8s", t.memory_shortfall(k, k, kc) > 0 ? "mem" : ms(t.compute(k, k, kc)).c_str());
    std::printf(" %10s\n", num(wl.kernels[k].output_bytes / 1e6).c_str());
  }
  print_memory(t, wl);
}

int run(Options o) {
  check_flags(o);
  std::string described;
  const sched::InputCharacteristics in = characteristics(o, described);
  const sched::ModelConfig config = sched::load_model_config(o.model_file);
  if (config.family == "gnn" && in.feature_len <= 0) {
    throw InputError("--features", "model '" + config.name + "' is a GNN: give the input feature length (> 0)");
  }
  if (config.family == "transformer" && (in.seq_len <= 0 || in.window <= 0)) {
    throw InputError("--seq-len/--window", "model '" + config.name + "' is a transformer: give both (> 0)");
  }
  // The built-in folder may be absent (binary moved away from its source tree): device models then.
  const bool use_fitted = o.perfmodels != "none" && (o.perfmodels_given || std::filesystem::is_directory(o.perfmodels));
  rt::CaseSpec spec{.system_file = o.system_file, .model = config, .input = in,
                    .perfmodels_dir = use_fitted ? o.perfmodels : "",
                    .cost_model = o.cost_model == "additive" ? rt::CostModelChoice::additive : rt::CostModelChoice::runtime,
                    .transfers = std::nullopt, .choose_images = o.images == "choose", .flat_only = o.shapes == "flat",
                    .reload_horizon = o.reload_horizon};
  // --transfers overrides the system file's `transfers:` (serial = the paper's timing).
  if (!o.transfers.empty())
    spec.transfers = o.transfers == "overlap" ? sched::TransferMode::overlap : sched::TransferMode::serial;
  const rt::PlanningCase planning(std::move(spec));
  if (!o.baseline.empty()) {
    const auto names = sched::baseline_names(planning.loaded().system);
    if (std::find(names.begin(), names.end(), o.baseline) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw InputError("--baseline", "unknown baseline '" + o.baseline + "' (this system has: " + list + ")");
    }
  }
  sched::ObjectiveSpec obj;
  obj.objective = sched::objective_from_string(o.mode);
  if (!(o.ratio > 0.0 && o.ratio <= 1.0)) throw InputError("--ratio", "must be in (0, 1], got " + num(o.ratio));
  obj.balance_ratio = o.ratio;
  if (o.min_throughput < 0.0) throw InputError("--min-throughput", "must be >= 0");
  if (o.max_latency < 0.0) throw InputError("--max-latency", "must be >= 0");
  obj.min_throughput_per_s = o.min_throughput;
  obj.max_latency_s = o.max_latency > 0.0 ? o.max_latency : sched::kInf;
  if (o.max_latency > 0.0 && obj.objective != sched::Objective::qos) throw InputError("--max-latency", "applies to --mode qos only");
  if (o.min_throughput > 0.0 && obj.objective != sched::Objective::qos && obj.objective != sched::Objective::latency)
    throw InputError("--min-throughput", "applies to --mode qos and latency only");
  const sched::SolverKind solver = sched::solver_from_string(o.solver);

  const auto t0 = std::chrono::steady_clock::now();
  rt::CasePlan chosen = planning.plan(obj, solver, o.baseline);
  sched::Plan& plan = chosen.plan;
  const std::string& image_note = chosen.image_note;
  const rt::ScheduleInputs& inputs = planning.inputs(chosen.assignment);
  if (o.baseline.empty()) {
    plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const sched::CostTables tables(inputs.system, *inputs.model);
  if (plan.empty() && o.baseline != "theoretical-additive") {
    throw sched::InfeasibleError("no plan can run every kernel of " + inputs.workload.model + " on this system");
  }
  if (o.explain && !plan.stages.empty() && plan.rounds == 1) sched::explain(plan, tables, obj);
  // Lower bounds on the best flat plan over the images the plan runs on (lower_bound.h).
  sched::Bounds bounds;
  if (o.bound) bounds = sched::lower_bounds(tables, obj);
  const bool seconds = obj.objective == sched::Objective::perf || obj.objective == sched::Objective::latency;
  std::vector<sched::Plan> front;
  if (o.pareto) front = sched::pareto_front_shapes(inputs.system, *inputs.model, planning.shapes());
  if (!o.dump_tables.empty()) {
    std::ofstream f(o.dump_tables);
    if (!f) throw InputError("--dump-tables", "cannot write " + o.dump_tables);
    f << tables.to_json().dump(1) << "\n";
  }

  if (o.as_json) {
    json j = plan_json(plan, inputs.workload);
    j["system"] = inputs.system.name;
    j["model"] = inputs.workload.model;
    j["input"] = described;
    j["cost_source"] = inputs.cost_source;
    if (!image_note.empty()) j["fpga_images"] = image_note;
    if (o.explain) j["cost_tables"] = tables.to_json();
    if (o.bound) {
      const auto bound_json = [&](const sched::Bound& b) {
        return b.ok ? json{{"value", b.value}, {"unit", seconds ? "s" : "J"}, {"method", b.method}, {"solve_time_s", b.solve_time_s}}
                    : json{{"why_not", b.why_not}};
      };
      j["bounds"] = {{"modelled", true}, {"over", "flat plans on these images"}, {"module_split", bound_json(bounds.split)},
                     {"lp_relaxation", bound_json(bounds.lp)},
                     {"max_throughput_per_s", bounds.max_throughput_per_s < sched::kInf ? json(bounds.max_throughput_per_s) : json(nullptr)}};
    }
    if (o.pareto) {
      j["pareto"] = json::array();
      for (const auto& p : front) j["pareto"].push_back(plan_json(p, inputs.workload));
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("dype-schedule: %s (%d kernels) on %s\n", inputs.workload.model.c_str(), inputs.workload.size(),
              inputs.system.name.c_str());
  std::printf("  input: %s\n  kernel times: %s\n", described.c_str(), inputs.cost_source.c_str());
  std::string kinds;
  for (std::size_t t = 0; t < inputs.system.kinds.size(); ++t)
    kinds += (kinds.empty() ? "" : ", ") + std::to_string(inputs.system.kinds[t].count) + " x " +
             inputs.system.where(static_cast<int>(t));
  std::printf("  devices: %s\n", kinds.c_str());
  if (inputs.system.hosts.size() > 1) {
    std::string hosts;
    for (const auto& h : inputs.system.hosts)
      hosts += (hosts.empty() ? "" : ", ") + h.name + " (NIC " + num(h.nic_bw_bytes_per_s * 8 / 1e9) + " Gb/s, " +
               num(h.nic_latency_s * 1e6) + " us)";
    std::printf("  hosts: %s; the first is the coordinator (modelled NIC hops)\n", hosts.c_str());
  }
  if (!image_note.empty()) std::printf("  FPGA images: %s (modelled)\n", image_note.c_str());
  print_plan(plan, inputs.workload, o.explain);
  if (o.explain) print_tables(tables, inputs.workload);
  if (o.bound) {
    std::printf("lower bounds on the best flat plan over these images (modelled):\n");
    for (const sched::Bound* b : {&bounds.split, &bounds.lp}) {
      if (!b->ok) {
        std::printf("  %s\n", b->why_not.c_str());
        continue;
      }
      const double v = seconds ? b->value * 1e3 : b->value;
      std::printf("  %s: %s %s (this plan %s above; bound in %s us)\n", b->method.c_str(), num(v).c_str(),
                  seconds ? "ms" : "J", (b->value > 0 ? sched::detail::percent(plan.score, b->value) : std::string("-")).c_str(),
                  num(b->solve_time_s * 1e6).c_str());
    }
    if (bounds.max_throughput_per_s < sched::kInf)
      std::printf("  throughput at most %s/s for any flat plan (module split's period bound, DiviML's UBound)\n",
                  num(bounds.max_throughput_per_s).c_str());
  }
  if (o.pareto) {
    std::printf("pareto front (throughput up, energy down, devices down), %zu plans:\n", front.size());
    std::printf("  %-24s %14s %12s %12s %8s\n", "mnemonic", "throughput/s", "period_ms", "J/inference", "devices");
    for (const auto& p : front) {
      std::printf("  %-24s %14s %12s %12s %8d\n", p.mnemonic.c_str(), num(p.throughput_per_s).c_str(),
                  ms(p.period_s).c_str(), num(p.energy_j).c_str(), p.devices_used);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"dype-schedule: plan a pipeline (DyPe scheduler) for a model, an input and a system"};
  app.add_option("--system", o.system_file, "system file (configs/systems/*.yaml)")->required();
  app.add_option("--model", o.model_file, "model config (configs/models/*.yaml)")->required();
  app.add_option("--graph", o.graph_file, "graph file: Matrix Market (.mtx) or SNAP edge list");
  app.add_option("--dataset", o.dataset, "a paper Table I shape: S1..S4, ogbn-arxiv, ogbn-products");
  app.add_option("--nodes", o.nodes_arg, "graph nodes");
  app.add_option("--edges", o.edges_arg, "graph edges (adjacency nnz, at most nodes^2)");
  app.add_option("--features", o.features_arg, "input feature length (GNN)");
  auto* skew_opt = app.add_option("--skew", o.skew, "degree skew: max row nnz / mean row nnz (>= 1)");
  app.add_option("--seq-len", o.seq_len_arg, "transformer sequence length");
  app.add_option("--window", o.window_arg, "transformer sliding window");
  app.add_option("--mode", o.mode,
                 "objective: perf, energy, balanced, qos, or latency (least end-to-end latency, with "
                 "--min-throughput as an optional floor)")
      ->check(CLI::IsMember({"perf", "energy", "balanced", "qos", "latency"}));
  app.add_option("--ratio", o.ratio, "balanced: throughput >= ratio x the perf optimum (default 0.7)");
  auto* min_tp_opt = app.add_option("--min-throughput", o.min_throughput, "qos: inferences per second at least (> 0)");
  auto* max_lat_opt = app.add_option("--max-latency", o.max_latency, "qos: end-to-end latency in seconds at most (> 0)");
  app.add_option("--solver", o.solver, "exact (default), paper (Algorithm 1 as published), milp (a mixed-integer program solved by CBC; small "
                 "models), milp-split (DiviML's MILP-SPLIT: module MILPs combined by a DP; --mode latency only), or "
                 "another paper's planner: heft, critical-path, kl (block partitioning with Kernighan-Lin "
                 "refinement), overseer (tree DP for least latency)")
      ->check(CLI::IsMember({"exact", "paper", "milp", "milp-split", "heft", "critical-path", "kl", "overseer"}));
  app.add_option("--shapes", o.shapes,
                 "all (default): flat plans and, for a model whose layers repeat, layer-recurrent ones "
                 "(stages every request traverses once per layer group, e.g. (1G3F1G)x32); flat: flat only")
      ->check(CLI::IsMember({"all", "flat"}));
  app.add_option("--images", o.images,
                 "choose (default): pick each FPGA's image among the manifests beside the loaded ones; "
                 "loaded: keep the images the system file loads")
      ->check(CLI::IsMember({"choose", "loaded"}));
  app.add_option("--reload-horizon", o.reload_horizon,
                 "requests an image reload's time is amortised over (default 1000)");
  app.add_option("--cost-model", o.cost_model,
                 "runtime (default): the cost model dype-serve plans with (shard times, host I/O, each side of a "
                 "hand-off as the transfer engine moves it), for configs the runtime runs; additive: the paper's "
                 "Algorithm 1 model (summed kernel times, one transfer time charged to both stages)")
      ->check(CLI::IsMember({"runtime", "additive"}));
  app.add_option("--baseline", o.baseline,
                 "a named baseline plan instead: gpu-only, fpga-only, cpu-only, theoretical-additive, static, fleetrec");
  app.add_flag("--pareto", o.pareto, "also print the Pareto front (throughput, energy, devices)");
  app.add_flag("--bound", o.bound,
               "also print lower bounds on the objective's optimum over flat plans: DiviML's module split (perf, "
               "latency) and the MILP's LP relaxation (every objective)");
  app.add_flag("--explain", o.explain, "say why each stage got its kind and count; print the cost tables");
  app.add_flag("--json", o.as_json, "print one JSON object");
  app.add_option("--dump-tables", o.dump_tables, "write the full cost tables as JSON to this file");
  app.add_option("--transfers", o.transfers,
                 "serial (copies block the devices, the paper's timing) or overlap (copies beside the kernels); "
                 "default: the system file's `transfers:`")
      ->check(CLI::IsMember({"serial", "overlap"}));
  auto* perfmodels_opt = app.add_option("--perfmodels", o.perfmodels,
                                        "folder of fitted performance models (<device model>.json from dype-profile) "
                                        "for kernel times; 'none': the devices' own models")
                             ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message naming the option
    return 2;     // bad input, as for every other mistake
  }
  o.perfmodels_given = perfmodels_opt->count() > 0;
  o.skew_given = skew_opt->count() > 0;
  o.min_throughput_given = min_tp_opt->count() > 0;
  o.max_latency_given = max_lat_opt->count() > 0;
  try {
    return run(o);
  } catch (const sched::InfeasibleError& e) {
    std::fprintf(stderr, "dype-schedule: infeasible: %s\n", e.what());
    return 3;
  } catch (const dype::Error& e) {
    std::fprintf(stderr, "dype-schedule: %s\n", e.what());
    return 2;
  }
}
