// Hosts in the scheduler's system model (issue 20): system files that list hosts and put kinds on
// them, the cost of a hand-off across hosts (device -> host -> NICs -> host -> device) and of the
// request's input and answer crossing to and from the coordinator, plans that say where each stage
// runs (host:kind), and the exact solver against brute force on random multi-host systems.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>

#include "scheduler/solver.h"
#include "../test_sched_instances.h"

namespace dype::sched {
namespace {

std::string systems() { return std::string(DYPE_SOURCE_DIR) + "/configs/systems/"; }

std::string error_of(const std::string& yaml) {
  try {
    parse_system_spec(yaml, "h.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::string& yaml, std::initializer_list<const char*> parts) {
  const std::string what = error_of(yaml);
  for (const char* p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
}

const std::string kGpu = "{name: gpu, count: 2, link_gbps: 31.5, latency_us: 8, power: {idle_w: 45, exec_w: 345}";
const std::string kFpga = "{name: fpga, count: 3, link_gbps: 15.76, latency_us: 10, power: {idle_w: 19.5, exec_w: 74.5}";
const std::string kTwoHosts =
    "hosts:\n  - {name: a, nic_gbit_per_s: 100, nic_latency_us: 3}\n  - {name: b, nic_gbit_per_s: 25, nic_latency_us: 5}\n";

TEST(SchedHosts, SystemFileListsHostsAndPutsKindsOnThem) {
  const SystemSpec s = parse_system_spec(kTwoHosts + "kinds:\n  - " + kGpu + "}\n  - " + kFpga + ", on_host: b}\n", "h.yaml");
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.hosts[0].name, "a");
  EXPECT_DOUBLE_EQ(s.hosts[0].nic_bw_bytes_per_s, 12.5e9);  // Gb/s in the file, bytes/s in the spec
  EXPECT_DOUBLE_EQ(s.hosts[1].nic_bw_bytes_per_s, 25e9 / 8);
  EXPECT_DOUBLE_EQ(s.hosts[1].nic_latency_s, 5e-6);
  EXPECT_EQ(s.kinds[0].host_index, 0);  // no on_host: the first host, the coordinator
  EXPECT_EQ(s.kinds[1].host_index, 1);
  EXPECT_EQ(s.where(0), "a:gpu");
  EXPECT_EQ(s.where(1), "b:fpga");
  // Without hosts: one host, names as before.
  const SystemSpec one = parse_system_spec("kinds:\n  - " + kGpu + "}\n", "h.yaml");
  EXPECT_TRUE(one.hosts.empty());
  EXPECT_EQ(one.where(0), "gpu");
  EXPECT_EQ(one.host_name(0), "");
  // The shipped two-host testbed: GPUs on the coordinator, FPGAs on b, 100 Gb/s.
  const SystemSpec two = load_system_spec(systems() + "two-host-100g.yaml");
  ASSERT_EQ(two.hosts.size(), 2u);
  EXPECT_EQ(two.where(two.kind_index("gpu")), "a:gpu");
  EXPECT_EQ(two.where(two.kind_index("fpga")), "b:fpga");
  EXPECT_DOUBLE_EQ(two.hosts[1].nic_bw_bytes_per_s, 12.5e9);
}

TEST(SchedHosts, HostMistakesNameFileAndKey) {
  const std::string kinds = "kinds:\n  - " + kGpu + "}\n";
  expect_error(kTwoHosts + "kinds:\n  - " + kGpu + ", on_host: c}\n", {"h.yaml: kinds[0].on_host", "unknown host 'c'"});
  expect_error("kinds:\n  - " + kGpu + ", on_host: a}\n", {"h.yaml: kinds[0].on_host", "unknown host 'a'", "lists no hosts"});
  expect_error("hosts:\n  - {name: a, nic_gbit_per_s: 100}\n  - {name: a, nic_gbit_per_s: 10}\n" + kinds,
               {"h.yaml: hosts[1].name", "duplicate host name 'a'"});
  expect_error("hosts:\n  - {name: a, nic_gbit_per_s: 0}\n" + kinds, {"h.yaml: hosts[0].nic_gbit_per_s", "> 0"});
  expect_error("hosts:\n  - {name: a, nic_gbit_per_s: -100}\n" + kinds, {"h.yaml: hosts[0].nic_gbit_per_s", "> 0"});
  expect_error("hosts:\n  - {name: a}\n" + kinds, {"h.yaml: hosts[0].nic_gbit_per_s", "required key missing"});
  expect_error("hosts:\n  - {name: a, nic_gbit_per_s: 10, nic_latency_us: -1}\n" + kinds,
               {"h.yaml: hosts[0].nic_latency_us", ">= 0"});
  expect_error("hosts:\n  - {name: a, nic_gbps: 10}\n" + kinds, {"h.yaml: hosts[0].nic_gbps", "unknown key"});
  expect_error("hosts: []\n" + kinds, {"h.yaml: hosts", "lists no host"});
  // A spec built in code is checked as well.
  SystemSpec s = paper_testbed();
  s.hosts = {{.name = "a", .nic_bw_bytes_per_s = 1e9, .nic_latency_s = 0}, {.name = "a", .nic_bw_bytes_per_s = 1e9, .nic_latency_s = 0}};
  EXPECT_THROW(s.validate(), InputError);
  s.hosts[1].name = "b";
  s.kinds[0].host_index = 2;
  EXPECT_THROW(s.validate(), InputError);
  s.kinds[0].host_index = 1;
  EXPECT_NO_THROW(s.validate());
}

TEST(SchedHosts, HandOffAcrossHostsGoesThroughBothHostsAndTheNics) {
  SystemSpec s = paper_testbed(true);  // fpga (socket 1), gpu (socket 0), cpu (host kind)
  const int f = s.kind_index("fpga"), g = s.kind_index("gpu"), c = s.kind_index("cpu");
  const double bytes = 64e6;
  const double one_host = s.transfer_time_s(bytes, {f, 3}, {g, 2});
  s.hosts = {{.name = "a", .nic_bw_bytes_per_s = 12.5e9, .nic_latency_s = 3e-6},
             {.name = "b", .nic_bw_bytes_per_s = 50e9, .nic_latency_s = 2e-6}};
  // Same host: unchanged.
  EXPECT_DOUBLE_EQ(s.transfer_time_s(bytes, {f, 3}, {g, 2}), one_host);
  s.kinds[f].host_index = 1;
  // Up the FPGAs' links (aggregate of 3), the slower NIC with both latencies, down the GPUs' links.
  const double up = 10e-6 + bytes / (3 * 15.76e9), nic = 5e-6 + bytes / 12.5e9, down = 8e-6 + bytes / (2 * 31.52e9);
  EXPECT_NEAR(s.transfer_time_s(bytes, {f, 3}, {g, 2}), up + nic + down, 1e-12);
  EXPECT_NEAR(s.transfer_time_s(bytes, {g, 2}, {f, 3}), up + nic + down, 1e-12);  // symmetric here
  EXPECT_NEAR(s.nic_time_s(bytes, 0, 1), nic, 1e-15);
  EXPECT_EQ(s.nic_time_s(bytes, 1, 1), 0.0);
  // A host kind has no device leg.
  EXPECT_NEAR(s.transfer_time_s(bytes, {c, 1}, {f, 2}), nic + 10e-6 + bytes / (2 * 15.76e9), 1e-12);
  EXPECT_GT(s.transfer_time_s(bytes, {f, 3}, {g, 2}), 2 * one_host);  // 100 Gb/s is slower than PCIe 4.0 x8 x3
  // A NIC faster than the links: the PCIe legs dominate.
  s.hosts[0].nic_bw_bytes_per_s = s.hosts[1].nic_bw_bytes_per_s = 400e9;
  EXPECT_NEAR(s.transfer_time_s(bytes, {f, 1}, {g, 1}), 10e-6 + bytes / 15.76e9 + 5e-6 + bytes / 400e9 + 8e-6 + bytes / 31.52e9,
              1e-12);
  EXPECT_EQ(s.transfer_time_s(0, {f, 1}, {g, 1}), 0.0);
}

// A workload of 3 kernels timed per kind, for the host I/O figures.
AdditiveCostModel three_kernels(const SystemSpec& s) {
  return AdditiveCostModel(s, {4e6, 8e6, 2e6}, {16e6, 4e6, 8e6},
                           {{1e-3, 2e-3}, {1e-3, 2e-3}, {1e-3, 2e-3}}, 1.0,
                           {kernels::OpKind::gemm, kernels::OpKind::gemm, kernels::OpKind::gemm});
}

TEST(SchedHosts, InputAndAnswerCrossTheNicWhenAnEndStageIsRemote) {
  SystemSpec s = paper_testbed();  // fpga, gpu
  s.kinds.resize(2);
  s.hosts = {{.name = "a", .nic_bw_bytes_per_s = 12.5e9, .nic_latency_s = 3e-6},
             {.name = "b", .nic_bw_bytes_per_s = 12.5e9, .nic_latency_s = 3e-6}};
  s.kinds[0].host_index = 1;  // FPGAs on b, GPUs on the coordinator
  const AdditiveCostModel m = three_kernels(s);
  const DeviceGroup fpga{0, 1}, gpu{1, 1};
  const double in = 6e-6 + 16e6 / 12.5e9, out = 6e-6 + 2e6 / 12.5e9;
  EXPECT_NEAR(m.host_input_s(fpga), in, 1e-15);
  EXPECT_NEAR(m.host_output_s(fpga), out, 1e-15);
  EXPECT_EQ(m.host_input_s(gpu), 0.0);
  EXPECT_EQ(m.host_output_s(gpu), 0.0);
  // In the compute of the ranges at the chain's ends, as copies: inbound the input, outbound the answer.
  EXPECT_NEAR(m.compute_time_s(0, 2, fpga), 3e-3 + in + out, 1e-12);
  EXPECT_NEAR(m.compute_time_s(1, 1, fpga), 1e-3, 1e-15);
  EXPECT_NEAR(m.copy_in_time_s(0, 1, fpga), in, 1e-15);
  EXPECT_EQ(m.copy_out_time_s(0, 1, fpga), 0.0);
  EXPECT_NEAR(m.copy_out_time_s(1, 2, fpga), out, 1e-15);
  EXPECT_NEAR(m.copy_time_s(0, 2, fpga), in + out, 1e-15);
  EXPECT_NEAR(m.compute_time_s(0, 2, gpu), 6e-3, 1e-15);
  // A plan 1F1G: input over the NIC into b, the hand-off back to a; the answer is already there.
  const CostTables t(s, m);
  const Plan p = evaluate({{0, 0, t.kc(fpga)}, {1, 2, t.kc(gpu)}}, t);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_NEAR(p.stages[0].compute_s, 1e-3 + in, 1e-12);
  EXPECT_NEAR(p.stages[0].transfer_out_s, s.transfer_time_s(4e6, fpga, gpu), 1e-15);
  EXPECT_NEAR(p.stages[1].compute_s, 4e-3, 1e-12);
  EXPECT_NEAR(p.latency_s, 1e-3 + in + s.transfer_time_s(4e6, fpga, gpu) + 4e-3, 1e-12);
  // Overlap: the input is on the FPGA stage's inbound engine, not its kernels.
  SystemSpec ov = s;
  ov.transfers = TransferMode::overlap;
  const AdditiveCostModel mo = three_kernels(ov);
  const CostTables to(ov, mo);
  const Plan po = evaluate({{0, 0, to.kc(fpga)}, {1, 2, to.kc(gpu)}}, to);
  EXPECT_NEAR(po.stages[0].kernels_s(), 1e-3, 1e-12);
  EXPECT_NEAR(po.stages[0].inbound_s(), in, 1e-12);
  EXPECT_TRUE(to.ranges_grow());
}

TEST(SchedHosts, PlansSayWhereEachStageRuns) {
  const SystemSpec two = load_system_spec(systems() + "two-host-100g.yaml");
  const Workload wl = build_workload(load_model_config(std::string(DYPE_SOURCE_DIR) + "/configs/models/gcn.yaml"),
                                     {.nodes = 169343, .nnz = 1166243, .feature_len = 128});
  const AdditiveCostModel m = AdditiveCostModel::from_gflops(two, wl);
  const Plan p = solve(two, m, {.objective = Objective::perf});
  const nlohmann::json j = to_json(p);
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const std::string where = j["stages"][s]["where"];
    EXPECT_EQ(where, p.stages[s].kind == two.kind_index("gpu") ? "a:gpu" : "b:fpga");
    EXPECT_EQ(j["stages"][s]["host"], where.substr(0, 1));
  }
  // One host: the JSON as before.
  const SystemSpec one = load_system_spec(systems() + "paper-testbed-gflops.yaml");
  const Plan q = solve(one, AdditiveCostModel::from_gflops(one, wl), {.objective = Objective::perf});
  EXPECT_FALSE(to_json(q)["stages"][0].contains("where"));
  EXPECT_EQ(q.where(q.stages[0].kind), q.kind_names[static_cast<std::size_t>(q.stages[0].kind)]);
}

// Random multi-host systems: 2-3 hosts, 1-3 kinds spread over them (host kinds among them), NICs
// from 8 to 800 Gb/s against PCIe links of 4-32 GB/s (slower and faster), an additive model with
// random kernel times and activation sizes, serial and overlapping transfers.
struct HostInstance {
  SystemSpec system;
  std::unique_ptr<AdditiveCostModel> model;
};

HostInstance random_host_instance(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::uniform_int_distribution<int> nk(1, 7), nkinds(1, 3), ncount(1, 3), nhosts(2, 3);
  auto logu = [&](double lo, double hi) { return lo * std::pow(hi / lo, u01(rng)); };
  HostInstance in;
  SystemSpec& s = in.system;
  const int hosts = nhosts(rng);
  for (int h = 0; h < hosts; ++h)
    s.hosts.push_back({.name = std::string(1, static_cast<char>('a' + h)), .nic_bw_bytes_per_s = logu(1e9, 100e9),
                       .nic_latency_s = logu(1e-6, 20e-6)});
  s.inter_socket_bw_bytes_per_s = logu(20e9, 200e9);
  s.transfers = u01(rng) < 0.5 ? TransferMode::overlap : TransferMode::serial;
  const int kinds = nkinds(rng);
  std::uniform_int_distribution<int> pick_host(0, hosts - 1);
  for (int t = 0; t < kinds; ++t) {
    DeviceKindSpec d;
    d.name = std::string("k") + static_cast<char>('0' + t);
    d.letter = "FGC"[t];
    d.count = ncount(rng);
    d.power.idle_w = logu(5, 60);
    d.power.exec_w = d.power.idle_w + logu(1, 300);
    d.power.xfer_w = d.power.idle_w + logu(0.5, 100);
    d.link_bw_bytes_per_s = logu(4e9, 32e9);
    d.link_latency_s = logu(1e-6, 20e-6);
    d.socket = u01(rng) < 0.5 ? 0 : 1;
    d.p2p = u01(rng) < 0.5;
    d.host = u01(rng) < 0.2;
    d.host_index = t < hosts && kinds > 1 ? (t + 1) % hosts : pick_host(rng);  // some kinds off the coordinator
    s.kinds.push_back(d);
  }
  const int n = nk(rng);
  std::vector<double> out(n), inb(n);
  std::vector<std::vector<double>> times(n, std::vector<double>(kinds));
  std::vector<kernels::OpKind> ops(n);
  for (int k = 0; k < n; ++k) {
    out[k] = logu(1e6, 1e9);
    inb[k] = k == 0 ? logu(1e6, 1e9) : out[k - 1];
    ops[k] = u01(rng) < 0.5 ? kernels::OpKind::spmm : kernels::OpKind::gemm;
    for (int t = 0; t < kinds; ++t) times[k][t] = u01(rng) < 0.12 ? kInf : logu(1e-3, 0.3);
  }
  in.model = std::make_unique<AdditiveCostModel>(s, out, inb, times, 0.6 + 0.4 * u01(rng), ops);
  return in;
}

double score(const Plan& p, Objective o) {
  return o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
}
double score(const EnumeratedPlan& p, Objective o) {
  return o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
}
bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

TEST(SchedHosts, ExactMatchesBruteForceOnRandomMultiHostSystems) {
  std::mt19937_64 rng(2020);
  const Objective objs[] = {Objective::perf, Objective::energy, Objective::balanced, Objective::qos, Objective::latency};
  int checked[5] = {}, infeasible[5] = {};
  int cross_host = 0, remote_first = 0, remote_last = 0, overlap = 0, nic_slower = 0, nic_faster = 0;
  for (int inst = 0; inst < 1500; ++inst) {
    const HostInstance in = random_host_instance(rng);
    const CostTables tables(in.system, *in.model);
    const auto all = enumerate_plans(tables);
    for (int oi = 0; oi < 5; ++oi) {
      const ObjectiveSpec spec = random_objective(objs[oi], all, rng);
      const double want = score(best_of(all, spec), objs[oi]);
      if (!(want < kInf)) {
        EXPECT_THROW(solve(tables, spec), InfeasibleError) << "instance " << inst << " " << to_string(objs[oi]);
        ++infeasible[oi];
        continue;
      }
      Plan got;
      ASSERT_NO_THROW(got = solve(tables, spec)) << "instance " << inst << " " << to_string(objs[oi]);
      ASSERT_TRUE(same(score(got, objs[oi]), want))
          << "instance " << inst << " " << to_string(objs[oi]) << ": exact " << score(got, objs[oi]) << " ("
          << got.mnemonic << ") vs brute force " << want;
      ++checked[oi];
      // What the optima exercised: hand-offs across hosts, end stages off the coordinator.
      const auto host_of = [&](const Stage& st) { return in.system.kinds[static_cast<std::size_t>(st.kind)].host_index; };
      for (std::size_t st = 0; st + 1 < got.stages.size(); ++st) {
        if (host_of(got.stages[st]) == host_of(got.stages[st + 1])) continue;
        ++cross_host;
        const auto& a = in.system.hosts[static_cast<std::size_t>(host_of(got.stages[st]))];
        const auto& b = in.system.hosts[static_cast<std::size_t>(host_of(got.stages[st + 1]))];
        const double nic = std::min(a.nic_bw_bytes_per_s, b.nic_bw_bytes_per_s);
        const double pcie = std::min(in.system.kinds[static_cast<std::size_t>(got.stages[st].kind)].link_bw_bytes_per_s,
                                     in.system.kinds[static_cast<std::size_t>(got.stages[st + 1].kind)].link_bw_bytes_per_s);
        (nic < pcie ? nic_slower : nic_faster) += 1;
      }
      remote_first += host_of(got.stages.front()) != 0;
      remote_last += host_of(got.stages.back()) != 0;
      overlap += got.stages.front().overlap;
    }
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("multi-host systems (2-3 hosts, <= 7 kernels, <= 3 kinds x <= 3 devices): exact agreed with brute force on\n");
  for (int oi = 0; oi < 5; ++oi) {
    std::printf("  %-8s %4d feasible (+%3d infeasible, both reported)\n", to_string(objs[oi]), checked[oi], infeasible[oi]);
    EXPECT_GT(checked[oi], 800);
  }
  std::printf("  optima with %d hand-offs across hosts (NIC slower than the links on %d, faster on %d), %d first and "
              "%d last stages off the coordinator, %d solves with overlapping transfers\n",
              cross_host, nic_slower, nic_faster, remote_first, remote_last, overlap);
  EXPECT_GT(cross_host, 300);
  EXPECT_GT(nic_slower, 50);
  EXPECT_GT(nic_faster, 50);
  EXPECT_GT(remote_first, 300);
  EXPECT_GT(remote_last, 300);
  EXPECT_GT(overlap, 1000);
}

}  // namespace
}  // namespace dype::sched
