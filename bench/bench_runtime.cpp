// Runtime benchmarks.
//
// 1. Drift (modelled): the emulated paper testbed (configs/systems/paper-testbed-pcie4.yaml,
//    timing-only, paper-scale shapes). A GCN stream moves through the DyPe paper's datasets
//    S4 -> S1 -> S3, then a sliding-window transformer stream whose seq_len grows. Three ways to
//    serve it: static (the first phase's plan throughout), dynamic (the engine's drift detector
//    re-plans), oracle (the best plan installed exactly at each phase start). Throughput is
//    requests / modelled makespan of the emulated devices' virtual clocks: every figure here is
//    MODELLED.
// 2. Per-request overhead (measured): a tiny graph through the engine on the local CPU device
//    (one request in flight) vs calling the kernels directly (the reference forward pass), and
//    that overhead against its floor on this machine, a bare two-thread round trip.
//
//   ./build/h2/bench/bench_runtime [--phase-requests 200] [--overhead-requests 3000]
//                                  [--tf-layers 4] [--tf-window 256] [--json out.json]
//                                  [--check-plans N]
//                                  [--perfmodels configs/perfmodels/amd-mi210.json,...]
//                                  [--paper-plans]
//                                  [--transfers serial|overlap] [--system
//                                  paper-testbed-two-host.yaml]
//                                  [--drift-only]
// --system: another emulated testbed (a file under configs/systems/ or a path), e.g. the paper's
// testbed split over two hosts with 100 Gb/s NICs (paper-testbed-two-host.yaml; issue 20): the
// remote host's devices run here, emulated, their copies paying the NIC legs (modelled).
// --drift-only: section 1's main comparison only (no phase orders, modes or overhead).
// --check-plans N: for each phase, the N best plans by the planner's cost model beside the period
// the pipeline really reaches with them on the emulated devices (both modelled), then exits.
// --paper-plans: the runtime planner's (RuntimeCostModel) perf plan for GCN and GIN on each paper
// Table I dataset at its own feature length on the PCIe 4.0 testbed, then exits (modelled).
// --perfmodels: plan on fitted performance models (dype-profile output) instead of the devices'
// own models, refined online in the dynamic run; the re-plan records say which source each kernel
// time came from. The static run plans its first phase on them without refinement (so it never
// re-plans); the oracle plans on the devices' own models (the emulated testbed's ground truth).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/emu/emu_device.h"
#include "hw/system.h"
#include "graph/generators.h"
#include "runtime/engine.h"
#include "runtime/host_memory.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/planner.h"
#include "scheduler/solver.h"

using namespace dype;

namespace {

// Fitted performance models (--perfmodels): when given, the planner predicts kernel times with
// them (refined online from the runs' kernel times) instead of the emulated devices' own models.
std::vector<perf::ModelStore> g_stores;

std::shared_ptr<rt::SchedPlanner> make_planner(const rt::Model& model, const hw::System& sys,
                                               std::vector<std::shared_ptr<rt::Observer>>* observers = nullptr) {
  if (g_stores.empty()) return std::make_shared<rt::SchedPlanner>(model, sys);
  auto p = std::make_shared<rt::PerfModelPlanner>(model, sys, g_stores);
  if (observers) observers->push_back(p);
  return p;
}

struct Phase {
  std::string name;
  std::shared_ptr<const rt::Graph> graph;  // GNN phases
  std::int64_t seq_len = 0;                // transformer phases
  std::int64_t window = 0;
};

rt::Request make_request(const rt::Model& m, const Phase& p) {
  if (m.is_gnn()) return rt::Request::gnn(p.graph, rt::HostTensor::shape_only(p.graph->nodes, m.spec().in_features));
  return rt::Request::transformer(rt::HostTensor::shape_only(p.seq_len, m.spec().d_model), p.window);
}

// --transfers serial|overlap: the testbed file says serial (the paper's timing).
bool g_overlap = false;
// --system FILE: the emulated testbed (a file under configs/systems/ or a path).
std::string g_system = "paper-testbed-pcie4.yaml";

std::string system_path() {
  if (g_system.find('/') != std::string::npos) return g_system;
  return std::string(DYPE_SOURCE_DIR) + "/configs/systems/" + g_system;
}

hw::System testbed() {
  auto cfg = hw::load_system_config(system_path());
  cfg.overlap_transfers = g_overlap;
  auto sys = hw::System::from_config(cfg);
  for (hw::Device* d : sys.devices())
    if (d->can_run_timing_only()) d->set_timing_only(true);
  return sys;
}

struct RunResult {
  std::string variant;
  std::int64_t requests = 0;
  double makespan_s = 0.0;  // modelled
  std::uint64_t swaps = 0;
  double energy_j = 0.0;  // modelled: per phase, the devices used in it, idle time included
  std::vector<std::string> plans;
  std::vector<nlohmann::json> replans;
};

RunResult run(const std::string& variant, const rt::Model& model, const std::vector<Phase>& phases, int per_phase,
              const std::string& mode = "perf") {
  hw::System sys = testbed();
  rt::EngineOptions o;
  // Only the dynamic run refines its models online: a refinement asks for a plan re-check, and a
  // static run that re-plans is not static. The oracle knows each phase's best plan, so it plans
  // on the emulated devices' own models (their ground truth) even when --perfmodels is given.
  std::shared_ptr<rt::SchedPlanner> planner =
      variant == "oracle" ? std::make_shared<rt::SchedPlanner>(model, sys)
                          : make_planner(model, sys, variant == "dynamic" ? &o.observers : nullptr);
  o.mode = mode;
  o.queue_capacity = 2;
  o.max_in_flight = 8;
  o.drift.enabled = variant == "dynamic";
  o.drift.sustain = 4;
  o.drift.min_requests_between = 8;
  // Solve on the detecting request's path so the swap serves that request: the modelled figures
  // then do not depend on how fast this machine solves against how fast requests are submitted
  // (the daemon solves beside the pipeline; its swaps land a few requests later).
  o.replan_beside = false;
  const auto first = make_request(model, phases[0]).characteristics();
  rt::Engine e(model, planner, first, o);
  RunResult r;
  r.variant = variant;
  r.plans.push_back(e.current_label());
  std::map<std::string, hw::EnergyReport> energy_at;  // per device, at the last phase boundary
  for (std::size_t p = 0; p < phases.size(); ++p) {
    const rt::Request req = make_request(model, phases[p]);
    if (variant == "oracle" && p > 0) {
      auto planned = planner->plan(req.characteristics(), mode, {});
      if (planned.mnemonic != e.current_label()) e.swap_to(planned.spec, planned.mnemonic);
    }
    for (int i = 0; i < per_phase; ++i) e.submit(req);
    e.drain();
    r.plans.push_back(e.current_label());
    // Energy of this phase: a device that neither executed nor transferred in it is off (the
    // scheduler's convention for devices a plan leaves unused); a used one draws idle power
    // whenever it is not busy, from the phase's start to its end (modelled).
    const double t_end = e.stats().modelled_makespan_s;
    for (hw::Device* d : sys.devices()) {
      const auto* emu = dynamic_cast<const hw::EmuDevice*>(d);
      if (!emu) continue;
      const hw::EnergyReport now = emu->energy_until(t_end);
      hw::EnergyReport& before = energy_at[d->name()];
      const double active = now.execute_j + now.transfer_j - before.execute_j - before.transfer_j;
      if (active > 0) r.energy_j += now.total_j() - before.total_j();
      before = now;
    }
  }
  e.drain();
  const auto st = e.stats();
  r.requests = static_cast<std::int64_t>(st.completed);
  r.makespan_s = st.modelled_makespan_s;
  r.swaps = st.swaps;
  for (const auto& rec : e.replans()) {
    r.replans.push_back({{"cause", rec.cause}, {"detail", rec.detail}, {"old", rec.old_plan}, {"new", rec.new_plan},
                         {"predicted_gain_modelled", rec.predicted_gain}, {"swapped", rec.swapped},
                         {"pause_us_measured", rec.pause_s * 1e6}, {"at_request", rec.at_request},
                         {"cost_source", rec.cost_source}});
  }
  return r;
}

// Steady-state modelled period of one plan in the runtime (fresh emulated devices).
double runtime_period_s(const rt::Model& model, const Phase& phase, const sched::Plan& plan) {
  hw::System sys = testbed();
  return rt::modelled_period_s(model, rt::to_pipeline_spec(plan, sys, {}), make_request(model, phase), 8, 32);
}

// For one phase: the cost model's best plans (predicted period) beside the period the runtime
// reaches with each of them on the emulated devices. Both are modelled; a gap means the planner's
// cost model and the runtime disagree about what a plan costs.
void check_plans(const rt::Model& model, const Phase& phase, int top) {
  hw::System sys = testbed();
  rt::SchedPlanner planner(model, sys);
  const rt::Request req = make_request(model, phase);
  const auto spec = planner.system_spec({});
  const auto cm = planner.cost_model(spec, req.characteristics());
  const sched::CostTables tables(spec, cm);
  auto all = sched::enumerate_plans(tables);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.period_s < b.period_s; });
  std::printf("phase %s: %zu plans; best %d by predicted period (MODELLED both)\n", phase.name.c_str(), all.size(), top);
  std::printf("  %-14s %14s %14s %8s   stages (kernels:group predicted compute/in/out ms)\n", "plan", "predicted_ms", "runtime_ms", "ratio");
  for (int i = 0; i < top && i < static_cast<int>(all.size()); ++i) {
    const sched::Plan p = sched::evaluate(all[static_cast<std::size_t>(i)].stages, tables);
    const double rt_s = runtime_period_s(model, phase, p);
    std::string st;
    for (const auto& s : p.stages)
      st += std::to_string(s.first) + "-" + std::to_string(s.last) + ":" + std::to_string(s.count) + p.kind_names[s.kind][0] + " " +
            std::to_string(s.compute_s * 1e3).substr(0, 6) + "/" + std::to_string(s.transfer_in_s * 1e3).substr(0, 6) + "/" +
            std::to_string(s.transfer_out_s * 1e3).substr(0, 6) + "  ";
    std::printf("  %-14s %14.3f %14.3f %8.2f   %s\n", p.mnemonic.c_str(), p.period_s * 1e3, rt_s * 1e3, rt_s / p.period_s, st.c_str());
  }
}

// The runtime planner's choice per paper Table I dataset (each at its own feature length), the
// counterpart of `dype-schedule --dataset X --mode perf` (which uses the scheduler's additive model).
void paper_plans() {
  std::printf("runtime planner (RuntimeCostModel), perf mode, paper-testbed-pcie4, Table I datasets (MODELLED)\n");
  std::printf("  %-14s %-10s %14s   %-10s %14s\n", "dataset", "GCN plan", "period_ms", "GIN plan", "period_ms");
  for (const auto ds : kernels::kAllPaperDatasets) {
    const auto shape = kernels::paper_shape(ds);
    rt::ModelSpec s;
    s.layers = 2;
    s.in_features = shape.feature_len;
    s.hidden = 128;
    s.materialize_weights = false;
    std::string row;
    for (const rt::Model& m : {rt::Model::gcn(s), rt::Model::gin(s)}) {
      hw::System sys = testbed();
      const Phase ph{"", rt::Graph::shape_only(shape.nodes, shape.edges + shape.nodes), 0, 0};
      auto planned = make_planner(m, sys)->plan(make_request(m, ph).characteristics(), "perf", {});
      char buf[64];
      std::snprintf(buf, sizeof buf, "   %-10s %14.3f", planned.mnemonic.c_str(), planned.period_s * 1e3);
      row += buf;
    }
    std::printf("  %-14s%s\n", std::string(kernels::to_string(ds)).c_str(), row.c_str());
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The peer of the engine's overhead: the least any asynchronous engine pays per request, one
// hand-off to a worker thread and one back (a condition variable there, a promise here), timed the
// same way. On a VM a wake-up of an idle vCPU can cost tens of microseconds, which no engine code
// can avoid.
double thread_round_trip_median_s(int n) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::promise<void>*> queue;
  bool stop = false;
  std::thread worker([&] {
    for (;;) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (stop) return;
      std::promise<void>* p = queue.front();
      queue.pop_front();
      lock.unlock();
      p->set_value();
    }
  });
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    std::promise<void> p;
    std::future<void> f = p.get_future();
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mu);
      queue.push_back(&p);
    }
    cv.notify_one();
    f.get();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_one();
  worker.join();
  return median(std::move(t));
}

}  // namespace

int main(int argc, char** argv) {
  dype::rt::retain_freed_host_memory();  // activations reuse heap pages (runtime/host_memory.h)
  int per_phase = 200, overhead_n = 3000, tf_layers = 4, check_top = 0;
  std::int64_t tf_window = 256;
  bool want_paper_plans = false, drift_only = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--phase-requests") per_phase = std::stoi(next());
    else if (a == "--overhead-requests") overhead_n = std::stoi(next());
    else if (a == "--tf-layers") tf_layers = std::stoi(next());
    else if (a == "--tf-window") tf_window = std::stoll(next());
    else if (a == "--json") json_path = next();
    else if (a == "--check-plans") check_top = std::stoi(next());
    else if (a == "--paper-plans") want_paper_plans = true;
    else if (a == "--drift-only") drift_only = true;
    else if (a == "--system") g_system = next();
    else if (a == "--transfers") {
      const std::string v = next();
      if (v != "serial" && v != "overlap") {
        std::fprintf(stderr, "--transfers: must be serial or overlap, got '%s'\n", v.c_str());
        return 2;
      }
      g_overlap = v == "overlap";
    }
    else if (a == "--perfmodels") {
      std::string list = next();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) g_stores.push_back(perf::ModelStore::load(list.substr(at, comma - at)));
        at = comma + 1;
      }
    }
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (want_paper_plans) {
    paper_plans();
    return 0;
  }
  nlohmann::json out;

  // ---- 1. drift (modelled) ----
  rt::ModelSpec gs;
  gs.layers = 2;
  gs.in_features = 128;
  gs.hidden = 128;
  gs.materialize_weights = false;
  const rt::Model gcn = rt::Model::gcn(gs);
  std::vector<Phase> gnn_phases;
  for (auto ds : {kernels::PaperDataset::s4, kernels::PaperDataset::s1, kernels::PaperDataset::s3}) {
    const auto shape = kernels::paper_shape(ds);
    // + self loops, as GCN normalisation adds them.
    gnn_phases.push_back({std::string(kernels::to_string(ds)), rt::Graph::shape_only(shape.nodes, shape.edges + shape.nodes), 0, 0});
  }
  rt::ModelSpec ts;
  ts.layers = tf_layers;
  ts.d_model = 512;
  ts.heads = 8;
  ts.ffn = 2048;
  ts.materialize_weights = false;
  const rt::Model tf = rt::Model::transformer(ts);
  std::vector<Phase> tf_phases = {{"seq1k", nullptr, 1024, tf_window}, {"seq4k", nullptr, 4096, tf_window}, {"seq16k", nullptr, 16384, tf_window}};

  if (check_top > 0) {
    for (const auto& p : gnn_phases) check_plans(gcn, p, check_top);
    for (const auto& p : tf_phases) check_plans(tf, p, check_top);
    return 0;
  }
  std::printf("drift benchmark (MODELLED: emulated %s, timing-only, %d requests per phase)\n",
              testbed().config().name.c_str(), per_phase);
  std::printf("planner kernel times: %s\n", g_stores.empty() ? "the emulated devices' own models"
                                                             : "fitted perf models (--perfmodels), refined online");
  std::printf("GCN phases: ");
  for (const auto& p : gnn_phases) std::printf("%s(nodes=%lld nnz=%lld) ", p.name.c_str(), static_cast<long long>(p.graph->nodes), static_cast<long long>(p.graph->nnz));
  std::printf("\ntransformer (%d layers, d=512, 8 heads, window %lld) phases: seq_len 1024 -> 4096 -> 16384\n", tf_layers,
              static_cast<long long>(tf_window));
  std::printf("%-8s %10s %16s %18s  plans per phase (GCN | transformer)\n", "variant", "requests", "makespan_s(mod)", "throughput/s(mod)");
  std::map<std::string, double> thr, thr_gcn, thr_tf;
  for (const std::string v : {"static", "dynamic", "oracle"}) {
    RunResult a = run(v, gcn, gnn_phases, per_phase);
    RunResult b = run(v, tf, tf_phases, per_phase);
    const double reqs = static_cast<double>(a.requests + b.requests);
    const double span = a.makespan_s + b.makespan_s;
    thr[v] = reqs / span;
    thr_gcn[v] = static_cast<double>(a.requests) / a.makespan_s;
    thr_tf[v] = static_cast<double>(b.requests) / b.makespan_s;
    std::string plans;
    for (const auto& p : a.plans) plans += p + " ";
    plans += "| ";
    for (const auto& p : b.plans) plans += p + " ";
    std::printf("%-8s %10.0f %16.4f %18.2f  %s\n", v.c_str(), reqs, span, thr[v], plans.c_str());
    std::printf("         GCN %.2f/s, transformer %.2f/s (modelled); swaps %llu + %llu\n",
                static_cast<double>(a.requests) / a.makespan_s, static_cast<double>(b.requests) / b.makespan_s,
                static_cast<unsigned long long>(a.swaps), static_cast<unsigned long long>(b.swaps));
    out["drift"][v] = {{"requests", reqs}, {"makespan_s_modelled", span}, {"throughput_per_s_modelled", thr[v]},
                       {"gcn_throughput_modelled", static_cast<double>(a.requests) / a.makespan_s},
                       {"transformer_throughput_modelled", static_cast<double>(b.requests) / b.makespan_s},
                       {"gcn_replans", a.replans}, {"transformer_replans", b.replans}};
    if (v == "dynamic") {
      for (const auto& r : a.replans) std::printf("         gcn replan: %s\n", r.dump().c_str());
      for (const auto& r : b.replans) std::printf("         transformer replan: %s\n", r.dump().c_str());
    }
  }
  const double vs_static = thr["dynamic"] / thr["static"], vs_oracle = thr["dynamic"] / thr["oracle"];
  std::printf("dynamic / static = %.3fx (target >= 1.3), dynamic / oracle = %.1f%% (target >= 95%%)  [modelled]\n",
              vs_static, 100.0 * vs_oracle);
  out["drift"]["dynamic_over_static_modelled"] = vs_static;
  out["drift"]["dynamic_over_oracle_modelled"] = vs_oracle;
  // Oracle / static bounds what switching plans at phase boundaries can give a stream; the
  // combined figure weighs each model's stream by its share of the makespan.
  std::printf("per model [modelled]: GCN dynamic / static %.3fx, oracle / static %.3fx; "
              "transformer dynamic / static %.3fx, oracle / static %.3fx; combined oracle / static %.3fx\n",
              thr_gcn["dynamic"] / thr_gcn["static"], thr_gcn["oracle"] / thr_gcn["static"],
              thr_tf["dynamic"] / thr_tf["static"], thr_tf["oracle"] / thr_tf["static"], thr["oracle"] / thr["static"]);
  out["drift"]["gcn_oracle_over_static_modelled"] = thr_gcn["oracle"] / thr_gcn["static"];
  out["drift"]["transformer_oracle_over_static_modelled"] = thr_tf["oracle"] / thr_tf["static"];
  out["drift"]["oracle_over_static_modelled"] = thr["oracle"] / thr["static"];
  out["drift"]["system"] = testbed().config().name;
  if (drift_only) {
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }

  // How much the figure owes to the phase order: "static" keeps the first phase's plan, so each
  // rotation of the GCN phases (the transformer stream unchanged) pins a different plan.
  {
    std::printf("\nphase-order sensitivity (MODELLED): each rotation of the GCN phases, transformer phases as above\n");
    std::printf("  %-14s %12s %12s %12s  %s\n", "GCN order", "static/s", "dynamic/s", "dyn/static", "dyn/oracle");
    double log_sum = 0;
    const std::size_t n = gnn_phases.size();
    std::map<std::string, RunResult> tf_runs;
    for (const std::string v : {"static", "dynamic", "oracle"}) tf_runs[v] = run(v, tf, tf_phases, per_phase);
    for (std::size_t rot = 0; rot < n; ++rot) {
      std::vector<Phase> order;
      std::string name;
      for (std::size_t i = 0; i < n; ++i) {
        order.push_back(gnn_phases[(rot + i) % n]);
        name += (i ? ">" : "") + order.back().name;
      }
      std::map<std::string, double> t;
      for (const std::string v : {"static", "dynamic", "oracle"}) {
        const RunResult a = run(v, gcn, order, per_phase);
        const RunResult& b = tf_runs[v];
        t[v] = static_cast<double>(a.requests + b.requests) / (a.makespan_s + b.makespan_s);
      }
      const double ratio = t["dynamic"] / t["static"];
      log_sum += std::log(ratio);
      std::printf("  %-14s %12.2f %12.2f %11.3fx %10.1f%%\n", name.c_str(), t["static"], t["dynamic"], ratio,
                  100.0 * t["dynamic"] / t["oracle"]);
      out["drift"]["orders"][name] = {{"static_per_s_modelled", t["static"]}, {"dynamic_per_s_modelled", t["dynamic"]},
                                      {"oracle_per_s_modelled", t["oracle"]}, {"dynamic_over_static_modelled", ratio}};
    }
    const double geo = std::exp(log_sum / static_cast<double>(n));
    std::printf("  geometric mean dynamic / static over the %zu orders: %.3fx (modelled)\n", n, geo);
    out["drift"]["orders_geomean_dynamic_over_static_modelled"] = geo;
  }

  // The same stream under the energy and balanced objectives (perf again for reference).
  std::printf("\nmodes (MODELLED): energy per inference and throughput, dynamic vs static (the first phase's plan for the mode)\n");
  std::printf("%-9s %-8s %12s %14s  %s\n", "mode", "variant", "J/inference", "throughput/s", "plans per phase (GCN | transformer)");
  for (const std::string mode : {"perf", "energy", "balanced"}) {
    std::map<std::string, std::pair<double, double>> fig;  // variant -> (J/inf, thr)
    for (const std::string v : {"static", "dynamic"}) {
      RunResult a = run(v, gcn, gnn_phases, per_phase, mode);
      RunResult b = run(v, tf, tf_phases, per_phase, mode);
      const double reqs = static_cast<double>(a.requests + b.requests);
      const double jpi = (a.energy_j + b.energy_j) / reqs, thr_v = reqs / (a.makespan_s + b.makespan_s);
      fig[v] = {jpi, thr_v};
      std::string plans;
      for (const auto& p : a.plans) plans += p + " ";
      plans += "| ";
      for (const auto& p : b.plans) plans += p + " ";
      std::printf("%-9s %-8s %12.3f %14.2f  %s\n", mode.c_str(), v.c_str(), jpi, thr_v, plans.c_str());
      std::printf("%-9s %-8s GCN %.3f J/inf %.2f/s, transformer %.4f J/inf %.2f/s\n", "", "",
                  a.energy_j / static_cast<double>(a.requests), static_cast<double>(a.requests) / a.makespan_s,
                  b.energy_j / static_cast<double>(b.requests), static_cast<double>(b.requests) / b.makespan_s);
      out["modes"][mode][v] = {{"energy_j_per_inference_modelled", jpi}, {"throughput_per_s_modelled", thr_v},
                               {"gcn_energy_j_per_inference_modelled", a.energy_j / static_cast<double>(a.requests)},
                               {"transformer_energy_j_per_inference_modelled", b.energy_j / static_cast<double>(b.requests)}};
    }
    std::printf("%-9s dynamic vs static: energy per inference %.3fx, throughput %.3fx\n", mode.c_str(),
                fig["dynamic"].first / fig["static"].first, fig["dynamic"].second / fig["static"].second);
  }

  // ---- 2. per-request overhead (measured) ----
  {
    auto sys = hw::System::from_config(hw::load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/local.yaml"));
    rt::ModelSpec s;
    s.layers = 2;
    s.in_features = 16;
    s.hidden = 16;
    const rt::Model m = rt::Model::gcn(s);
    auto g = rt::Graph::from_edges(rt::random_graph(64, 256, 1), true);
    const rt::Request req = rt::Request::gnn(g, rt::make_tensor(64, 16, kernels::generate_features(64, 16, 2)));
    std::vector<double> direct, engine;
    for (int i = 0; i < overhead_n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto y = rt::reference_forward(m, req);
      direct.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    rt::EngineOptions o;
    o.max_in_flight = 1;
    o.drift.enabled = false;
    rt::Engine e(m, std::make_shared<rt::SchedPlanner>(m, sys),
                 rt::PipelineSpec{{{0, 3, {&sys.device("cpu0")}, 0.0}}, "1C"}, req.characteristics(), o);
    for (int i = 0; i < overhead_n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto y = e.submit(req).get();
      engine.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double md = median(direct), me = median(engine);
    const double rt = thread_round_trip_median_s(overhead_n);
    std::printf(
        "per-request overhead (MEASURED, tiny GCN 64 nodes/256 edges, cpu0, %d requests): direct "
        "median %.1f us, "
        "engine median %.1f us, overhead %.1f us (target <= 50 us); a bare thread round trip (the "
        "peer) "
        "%.1f us: overhead / round trip %.2fx\n",
        overhead_n, md * 1e6, me * 1e6, (me - md) * 1e6, rt * 1e6, (me - md) / rt);
    out["overhead"] = {{"direct_median_us_measured", md * 1e6},
                       {"engine_median_us_measured", me * 1e6},
                       {"overhead_us_measured", (me - md) * 1e6},
                       {"thread_round_trip_us_measured", rt * 1e6},
                       {"requests", overhead_n}};
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
  }
  return 0;
}
