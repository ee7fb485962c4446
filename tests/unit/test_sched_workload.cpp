// Workloads from model configs, the system spec and its link model, plan JSON and the baselines.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>

#include "scheduler/baselines.h"
#include "scheduler/solver.h"
#include "runtime/model.h"

namespace dype::sched {
namespace {

std::string models() { return std::string(DYPE_SOURCE_DIR) + "/configs/models/"; }

const InputCharacteristics kArxiv{.nodes = 169343, .nnz = 1166243, .feature_len = 128};

TEST(SchedWorkload, ShippedModelsBuildThePapersKernelChains) {
  const Workload gcn = build_workload(load_model_config(models() + "gcn.yaml"), kArxiv);
  ASSERT_EQ(gcn.size(), 4);
  EXPECT_EQ(gcn.kernels[0].shape.kind, kernels::OpKind::spmm);
  EXPECT_EQ(gcn.kernels[1].shape.kind, kernels::OpKind::gemm);
  EXPECT_EQ(gcn.kernels[0].shape.nnz, kArxiv.nnz);
  EXPECT_DOUBLE_EQ(gcn.kernels[0].flops, 2.0 * kArxiv.nnz * 128);
  EXPECT_EQ(gcn.kernels[1].shape.n, 128);
  EXPECT_DOUBLE_EQ(gcn.kernels[3].output_bytes, 4.0 * kArxiv.nodes * 128);

  const Workload gin = build_workload(load_model_config(models() + "gin.yaml"), kArxiv);
  ASSERT_EQ(gin.size(), 6);  // (SpMM, GEMM, GEMM) x 2
  EXPECT_EQ(gin.kernels[3].shape.kind, kernels::OpKind::spmm);

  const Workload tf = build_workload(load_model_config(models() + "swin-transformer.yaml"),
                                     {.seq_len = 4096, .window = 512});
  ASSERT_EQ(tf.size(), 160);
  const kernels::OpShape& att = tf.kernels[1].shape;
  EXPECT_EQ(att.kind, kernels::OpKind::window_attention);
  EXPECT_EQ(att.heads, 8);
  EXPECT_EQ(att.head_dim, 64);
  EXPECT_EQ(att.window, 512);
  EXPECT_EQ(tf.kernels[0].shape.n, 1536);  // fused QKV
  EXPECT_EQ(tf.kernels[3].shape.n, 2048);  // FFN up
  EXPECT_DOUBLE_EQ(tf.kernels[159].output_bytes, 4.0 * 4096 * 512);
}

// dype-schedule's GraphSAGE (configs/models/sage.yaml) is the chain dype-serve runs (rt::Model::sage):
// the interleaved SpMM (2 rows and one more nonzero per node, twice as wide out) and the stacked GEMM.
TEST(SchedWorkload, SageChainIsTheOneTheDaemonRuns) {
  const Workload wl = build_workload(load_model_config(models() + "sage.yaml"), kArxiv);
  const rt::Model m = rt::Model::sage({.layers = 2, .in_features = 128, .hidden = 128, .materialize_weights = false});
  const auto shapes = m.kernel_shapes({.nodes = kArxiv.nodes, .nnz = kArxiv.nnz + kArxiv.nodes, .feature_len = 128});
  ASSERT_EQ(wl.size(), static_cast<int>(shapes.size()));
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const kernels::OpShape& a = wl.kernels[i].shape;
    EXPECT_EQ(a.kind, shapes[i].kind) << i;
    EXPECT_EQ(a.m, shapes[i].m) << i;
    EXPECT_EQ(a.k, shapes[i].k) << i;
    EXPECT_EQ(a.n, shapes[i].n) << i;
    EXPECT_EQ(a.nnz, shapes[i].nnz) << i;
  }
  EXPECT_EQ(wl.kernels[0].shape.m, 2 * kArxiv.nodes);
  EXPECT_DOUBLE_EQ(wl.kernels[0].output_bytes, 4.0 * kArxiv.nodes * 256);
  EXPECT_EQ(wl.kernels[1].shape.k, 256);
  EXPECT_THROW(parse_model_config("name: x\nfamily: gnn\nlayer:\n  - {op: gemm, with_self: true}\n", "x.yaml"), InputError);
}

TEST(SchedWorkload, BadConfigsAndInputsNameTheProblem) {
  try {
    parse_model_config("name: x\nfamily: gnn\nlayer:\n  - {op: spmv}\n", "m.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("m.yaml: layer[0].op"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("spmv"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_model_config("name: x\nfamily: rnn\nlayer: [{op: gemm}]\n", "m.yaml"), InputError);
  EXPECT_THROW(parse_model_config("name: x\nfamily: gnn\nlayer: [{op: gemm, out: wide}]\n", "m.yaml"), InputError);
  EXPECT_THROW(parse_model_config("name: [x\n", "m.yaml"), InputError);
  const ModelConfig tf = load_model_config(models() + "swin-transformer.yaml");
  try {
    build_workload(tf, {.seq_len = 1024, .window = 2048});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds seq_len"), std::string::npos) << e.what();
  }
  EXPECT_THROW(build_workload(load_model_config(models() + "gcn.yaml"), {.nodes = 10}), InputError);
  EXPECT_THROW(load_model_config(models() + "no-such-model.yaml"), InputError);
}

// Every config mistake names the file, the key path and the problem; nothing is silently ignored.
std::string error_of(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::function<void()>& parse, std::initializer_list<const char*> parts) {
  const std::string what = error_of(parse);
  for (const char* part : parts) EXPECT_NE(what.find(part), std::string::npos) << "missing '" << part << "' in: " << what;
}

TEST(SchedWorkload, ModelConfigMistakesNameFileAndKeyPath) {
  const auto model = [](const std::string& yaml) { return [yaml] { parse_model_config(yaml, "m.yaml"); }; };
  expect_error(model("name: x\nfamily: gnn\nlayer: [{op: gemm}]\nlayer_count: 2\n"), {"m.yaml: layer_count", "unknown key"});
  expect_error(model("family: gnn\nlayer: [{op: gemm, outs: hidden}]\n"), {"m.yaml: layer[0].outs", "unknown key"});
  expect_error(model("family: gnn\nlayers: two\nlayer: [{op: gemm}]\n"), {"m.yaml: layers", "must be an integer, got 'two'"});
  expect_error(model("family: gnn\nlayers: 0\nlayer: [{op: gemm}]\n"), {"m.yaml: layers", "[1, 100000]"});
  expect_error(model("family: gnn\ndims: {hidden: -4}\nlayer: [{op: gemm}]\n"), {"m.yaml: dims.hidden", "must be > 0"});
  expect_error(model("family: gnn\ndims: {hidden: wide}\nlayer: [{op: gemm}]\n"), {"m.yaml: dims.hidden", "must be an integer"});
  expect_error(model("family: gnn\nlayer: [{name: agg}]\n"), {"m.yaml: layer[0].op", "required key missing"});
  expect_error(model("family: gnn\nlayer: []\n"), {"m.yaml: layer", "must list"});
  expect_error(model("family: gnn\nlayer: [{op: gemm, out: wide}]\n"), {"m.yaml: layer[0].out", "unknown dim 'wide'"});
  expect_error(model("family: gnn\nlayer: [{op: gemm}]\nlast_out: classes\n"), {"m.yaml: last_out", "unknown dim 'classes'"});
  expect_error(model("family: gnn\nlayer: [{op: gemm}\n"), {"m.yaml:"});  // YAML syntax
  EXPECT_EQ(error_of(model("family: gnn\ndims: {hidden: 64}\nlayer: [{op: spmm}, {op: gemm, out: hidden}]\n")),
            "(no error)");
}

TEST(SchedWorkload, SystemConfigMistakesNameFileAndKeyPath) {
  const auto system = [](const std::string& yaml) { return [yaml] { parse_system_spec(yaml, "s.yaml"); }; };
  const std::string kind = "{name: gpu, count: 1, link_gbps: 31.5, power: {idle_w: 45, exec_w: 345}";
  // A misspelt flag used to read as its default (p2p: false) without a word.
  expect_error(system("kinds:\n  - " + kind + ", pp2p: true}\n"), {"s.yaml: kinds[0].pp2p", "unknown key"});
  expect_error(system("kinds:\n  - " + kind + ", p2p: maybe}\n"), {"s.yaml: kinds[0].p2p", "true or false"});
  expect_error(system("kinds:\n  - {name: gpu, count: 1, link_gbps: 31.5, power: {idle_w: 45, exec: 345}}\n"),
               {"s.yaml: kinds[0].power.exec", "unknown key"});
  expect_error(system("kinds:\n  - {name: gpu, count: few, link_gbps: 31.5}\n"), {"s.yaml: kinds[0].count", "must be an integer"});
  expect_error(system("kinds:\n  - " + kind + ", gflops: {spmv: 10}}\n"), {"s.yaml: kinds[0].gflops.spmv", "unknown op"});
  expect_error(system("kinds:\n  - " + kind + ", gflops: {gemm: -1}}\n"), {"s.yaml: kinds[0].gflops.gemm", ">= 0"});
  expect_error(system("kinds:\n  - " + kind + "}\nbaselines: {op_kind: {gemm: tpu}}\n"),
               {"s.yaml: baselines.op_kind.gemm", "unknown device kind 'tpu'"});
  expect_error(system("kinds:\n  - " + kind + "}\nbaselines: {static_counts: [1, x]}\n"),
               {"s.yaml: baselines.static_counts[1]", "must be an integer"});
  expect_error(system("name: lab\n"), {"s.yaml: kinds", "required key missing"});
  expect_error(system("kinds:\n  - " + kind + "}\ninter_socket_gbps: 0\n"), {"s.yaml: inter_socket_gbps", "> 0"});
  EXPECT_EQ(error_of(system("kinds:\n  - " + kind + ", p2p: true}\nbaselines: {op_kind: {gemm: gpu}, static_counts: [1]}\n")),
            "(no error)");
}

TEST(SchedWorkload, LinkModelP2PStagedAndAggregateBandwidth) {
  SystemSpec s = paper_testbed(true);
  const int f = s.kind_index("fpga"), g = s.kind_index("gpu"), c = s.kind_index("cpu");
  const double bytes = 64e6;
  // P2P FPGA -> GPU across sockets: bounded by the slower side's aggregate bandwidth.
  const double one = s.transfer_time_s(bytes, {f, 1}, {g, 1});
  EXPECT_NEAR(one, 10e-6 + bytes / 15.76e9, 1e-9);
  const double three = s.transfer_time_s(bytes, {f, 3}, {g, 2});
  EXPECT_NEAR(three, 10e-6 + bytes / (3 * 15.76e9), 1e-9);
  // Without P2P the copy is staged through host memory: two hops plus the socket link.
  SystemSpec staged = s;
  staged.kinds[f].p2p = false;
  const double st = staged.transfer_time_s(bytes, {f, 1}, {g, 1});
  EXPECT_NEAR(st, 18e-6 + bytes / 15.76e9 + bytes / 31.52e9 + bytes / 128e9, 1e-9);
  EXPECT_GT(st, one * 1.4);  // the paper measured ~2x for P2P at large sizes
  // Host kind: one hop.
  EXPECT_NEAR(s.transfer_time_s(bytes, {c, 1}, {g, 2}), 8e-6 + bytes / (2 * 31.52e9), 1e-9);  // GPU-side latency
  EXPECT_EQ(s.transfer_time_s(0, {f, 1}, {g, 1}), 0.0);
}

TEST(SchedWorkload, SystemYamlParsesAndValidates) {
  const char* yaml = R"(
name: lab
inter_socket_gbps: 64
kinds:
  - {name: gpu, letter: G, count: 4, socket: 0, p2p: true, link_gbps: 31.5, latency_us: 8,
     power: {idle_w: 45, exec_w: 345, xfer_w: 90}, gflops: {gemm: 18000, spmm: 120}}
  - {name: cpu, count: 1, host: true, link_gbps: 100, power: {idle_w: 90, exec_w: 280, xfer_w: 120},
     gflops: {gemm: 1500, spmm: 30}}
baselines: {op_kind: {spmm: cpu, gemm: gpu}}
)";
  const SystemSpec s = parse_system_spec(yaml, "lab.yaml");
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.kinds[1].letter, 'C');
  EXPECT_DOUBLE_EQ(s.inter_socket_bw_bytes_per_s, 64e9);
  EXPECT_EQ(s.op_kind[static_cast<int>(kernels::OpKind::spmm)], 1);
  try {
    parse_system_spec("kinds:\n  - {name: gpu, count: 1, link_gbps: 1, power: {idle_w: 50, exec_w: 10}}\n", "bad.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml.kinds[0] (gpu).power.exec_w"), std::string::npos) << e.what();
  }
}

TEST(SchedWorkload, GcnOnThePaperSystemPlanJsonAndBaselines) {
  const SystemSpec sys = paper_testbed();
  const Workload wl = build_workload(load_model_config(models() + "gcn.yaml"),
                                     {.nodes = 2449029, .nnz = 61859140, .feature_len = 100});
  const AdditiveCostModel model = AdditiveCostModel::from_gflops(sys, wl);
  const Plan perf = solve(sys, model, {Objective::perf});
  const Plan bal = solve(sys, model, {Objective::balanced});
  const Plan energy = solve(sys, model, {Objective::energy});
  EXPECT_FALSE(perf.mnemonic.empty());
  EXPECT_GE(bal.throughput_per_s, 0.7 * perf.throughput_per_s * (1 - 1e-9));
  EXPECT_LE(energy.energy_j, bal.energy_j * (1 + 1e-9));
  const nlohmann::json j = to_json(perf);
  for (const char* key : {"mnemonic", "stages", "period_s", "throughput_per_s", "latency_s",
                          "energy_j_per_inference", "solve_time_s", "objective", "solver"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["solver"], "exact");
  EXPECT_EQ(j["figures"], "modelled");
  ASSERT_EQ(j["stages"].size(), perf.stages.size());
  for (const auto& st : j["stages"]) {
    EXPECT_TRUE(st.contains("why"));
    EXPECT_TRUE(st.contains("compute_s") && st.contains("transfer_in_s") && st.contains("transfer_out_s"));
  }
  // Mnemonic: count then letter per stage, device counts within the system.
  int f = 0, g = 0;
  for (const Stage& s : perf.stages) (s.kind == 0 ? f : g) += s.count;
  EXPECT_LE(f, 3);
  EXPECT_LE(g, 2);
  std::string expect;
  for (const Stage& s : perf.stages) expect += std::to_string(s.count) + (s.kind == 0 ? "F" : "G");
  EXPECT_EQ(perf.mnemonic, expect);

  // Baselines: DyPe's perf plan is at least as fast as every one of them (they are restricted
  // searches of the same space), and its energy plan at least as frugal.
  for (const std::string& name : baseline_names(sys)) {
    const Plan b = baseline(name, sys, model, wl, {Objective::perf});
    EXPECT_EQ(b.solver, name);
    if (name == "theoretical-additive") {
      const Plan g_only = baseline("gpu-only", sys, model, wl);
      const Plan f_only = baseline("fpga-only", sys, model, wl);
      EXPECT_NEAR(b.throughput_per_s, g_only.throughput_per_s + f_only.throughput_per_s, 1e-9 * b.throughput_per_s);
      continue;
    }
    EXPECT_LE(perf.period_s, b.period_s * (1 + 1e-9)) << name << " " << b.mnemonic;
    EXPECT_LE(energy.energy_j, b.energy_j * (1 + 1e-9)) << name << " " << b.mnemonic;
  }
  const Plan st = baseline("static", sys, model, wl);
  EXPECT_EQ(st.mnemonic, "2F1G1F1G");  // SpMM on FPGAs, GEMM on GPUs, devices split evenly
  const Plan g_only = baseline("gpu-only", sys, model, wl);
  for (const Stage& s : g_only.stages) EXPECT_EQ(s.kind, 1);
  EXPECT_THROW(baseline("cpu-only", sys, model, wl), InfeasibleError);  // no cpu kind in this system
  // Cost tables dump: one row per (range, kind, count).
  const CostTables tables(sys, model);
  const auto dump = tables.to_json();
  EXPECT_EQ(dump["compute"].size(), 10u * 5u);
  EXPECT_EQ(dump["transfer"].size(), 3u * 5u * 5u);
}

TEST(SchedWorkload, TransformerPlansAndParetoFront) {
  const SystemSpec sys = paper_testbed();
  const Workload wl = build_workload(load_model_config(models() + "swin-transformer.yaml"),
                                     {.seq_len = 8192, .window = 1024});
  const AdditiveCostModel model = AdditiveCostModel::from_gflops(sys, wl);
  const Plan perf = solve(sys, model, {Objective::perf});
  const Plan paper = solve(sys, model, {Objective::perf}, SolverKind::paper);
  EXPECT_LE(perf.period_s, paper.period_s * (1 + 1e-9));
  const auto front = pareto_front(CostTables(sys, model));
  ASSERT_FALSE(front.empty());
  EXPECT_NEAR(front.front().period_s, perf.period_s, 1e-9 * perf.period_s);
}

}  // namespace
}  // namespace dype::sched
