// Pipelines of every shape compute what the single-device CPU reference computes.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <map>
#include <mutex>

#include "graph/gather_locality.h"
#include "graph/generators.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "test_rt_common.h"
#include "../test_rt_requests.h"

namespace dype::rt {
namespace {

using testing::gnn_requests;
using testing::tf_requests;

// Runs `reqs` through the pipeline and checks each against the reference, in order.
void run_and_check(const Model& m, PipelineSpec spec, const std::vector<Request>& reqs, const std::string& what) {
  testing::expect_pipeline_matches_reference(m, std::move(spec), reqs, what, 1e-5);
}

// Every split, with every stage on c = 1, 2, 3 devices and with mixed counts.
void check_all_shapes(const Model& m, const std::vector<Request>& reqs, hw::System& sys) {
  auto gpus = sys.devices_of(hw::DeviceKind::gpu);
  int checked = 0;
  for (const auto& split : testing::all_splits(m.num_kernels())) {
    for (int pattern = 0; pattern < 4; ++pattern) {
      PipelineSpec spec;
      std::size_t next = 0;
      for (std::size_t s = 0; s < split.size(); ++s) {
        const int c = pattern < 3 ? pattern + 1 : static_cast<int>((s % 3) + 1);
        PipelineStage st{split[s].first, split[s].second, {}, 0.0};
        for (int i = 0; i < c; ++i) st.devices.push_back(gpus.at(next++));
        spec.stages.push_back(st);
      }
      run_and_check(m, spec, reqs, describe(spec));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * (1 << (m.num_kernels() - 1)));
}

TEST(RtModel, GcnReferenceMatchesDenseFormula) {
  Model m = Model::gcn({.layers = 1, .in_features = 5, .hidden = 3, .seed = 3});
  kernels::EdgeList e;
  e.num_nodes = 4;
  e.src = {0, 1, 2, 3, 0};
  e.dst = {1, 2, 3, 0, 2};
  auto g = Graph::from_edges(e, true);
  auto x = kernels::generate_features(4, 5, 9);
  Request r = Request::gnn(g, make_tensor(4, 5, x));
  HostTensor y = reference_forward(m, r);
  // Dense: A_hat = D^-1/2 (A + I) D^-1/2 with row = destination.
  double a[4][4] = {};
  for (std::size_t i = 0; i < e.src.size(); ++i) a[e.dst[i]][e.src[i]] += 1;
  for (int i = 0; i < 4; ++i) a[i][i] += 1;
  double deg[4] = {};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) deg[i] += a[i][j];
  const auto& w = m.weight(m.step(1).weights[0]).data;
  const auto& b = m.weight(m.step(1).weights[1]).data;
  for (int i = 0; i < 4; ++i) {
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int f = 0; f < 5; ++f) {
        double h = 0;
        for (int j = 0; j < 4; ++j) h += a[i][j] / std::sqrt(deg[i] * deg[j]) * x[j * 5 + f];
        acc += h * w[f * 3 + o];
      }
      EXPECT_NEAR(y.data[i * 3 + o], acc, 1e-5);
    }
  }
}

// The CSR from_edges builds (sorted rows, merged duplicates with summed weights, self loops, GCN's
// symmetric normalisation or GIN's 1 + eps diagonal) against a map-based construction, on graphs with
// duplicates, long rows (past the insertion-sort cut) and weighted edges.
TEST(RtModel, FromEdgesMatchesAStraightforwardConstruction) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const std::int64_t n = 5 + static_cast<std::int64_t>(seed * 7 % 60);
    kernels::EdgeList e = random_graph(n, n * static_cast<std::int64_t>(1 + seed % 9), seed);
    for (int k = 0; k < 40; ++k) {  // one hub row with many (repeated) in-edges
      e.src.push_back((k * 13 + static_cast<std::int64_t>(seed)) % n);
      e.dst.push_back(0);
    }
    for (std::int64_t k = 0; k < 3; ++k) {  // loop edges, one node twice
      e.src.push_back(k % 2 + 1);
      e.dst.push_back(k % 2 + 1);
    }
    if (seed % 2 == 0) {
      for (std::size_t i = 0; i < e.src.size(); ++i) e.weight.push_back(0.25f + static_cast<float>((i * 7) % 5));
    }
    for (const bool gcn : {true, false}) {
      const float eps = 0.3f;
      auto g = Graph::from_edges(e, gcn, eps);
      // PyG's gcn_norm: a node's loop edges give way to one loop with the last one's weight (1 if
      // none); GIN keeps loop edges as neighbours and adds (1 + eps) x_i.
      std::vector<std::map<std::int64_t, double>> rows(static_cast<std::size_t>(n));
      std::vector<double> loop(static_cast<std::size_t>(n), 1.0);
      for (std::size_t i = 0; i < e.src.size(); ++i) {
        const double w = e.weight.empty() ? 1.0 : e.weight[i];
        if (gcn && e.src[i] == e.dst[i]) loop[static_cast<std::size_t>(e.src[i])] = w;
        else rows[static_cast<std::size_t>(e.dst[i])][e.src[i]] += w;
      }
      for (std::int64_t r = 0; r < n; ++r) rows[static_cast<std::size_t>(r)][r] += gcn ? loop[static_cast<std::size_t>(r)] : 1.0 + eps;
      std::vector<double> deg(static_cast<std::size_t>(n), 0.0);
      for (std::int64_t r = 0; r < n; ++r)
        for (const auto& [c, w] : rows[static_cast<std::size_t>(r)]) deg[static_cast<std::size_t>(r)] += w;
      ASSERT_EQ(g->indptr.size(), static_cast<std::size_t>(n) + 1);
      std::size_t k = 0;
      for (std::int64_t r = 0; r < n; ++r) {
        ASSERT_EQ(g->indptr[static_cast<std::size_t>(r + 1)] - g->indptr[static_cast<std::size_t>(r)],
                  static_cast<std::int32_t>(rows[static_cast<std::size_t>(r)].size()));
        for (const auto& [c, w] : rows[static_cast<std::size_t>(r)]) {
          ASSERT_EQ(g->indices[k], c) << "seed " << seed << " row " << r;
          const double want = gcn ? w / std::sqrt(deg[static_cast<std::size_t>(r)] * deg[static_cast<std::size_t>(c)]) : w;
          EXPECT_NEAR(g->values[k], want, 1e-6 * std::abs(want)) << "seed " << seed << " row " << r;
          ++k;
        }
      }
      EXPECT_EQ(k, static_cast<std::size_t>(g->nnz));
    }
  }
}

// A graph's gather locality (graph/gather_locality.h) is computed when the runtime builds
// it and reaches every SpMM shape the planner and the performance models see; shape-only graphs
// have none (the models then assume random columns).
TEST(RtModel, GraphLocalityReachesTheSpmmShapes) {
  const kernels::EdgeList e = random_graph(3000, 30000, 11);
  for (const bool gcn : {true, false}) {
    const auto g = Graph::from_edges(e, gcn);
    ASSERT_TRUE(g->locality.known());
    EXPECT_EQ(g->locality.miss, kernels::gather_locality(g->indices, g->nodes).miss);
    const Model m = gcn ? Model::gcn({.layers = 2, .in_features = 16, .hidden = 16})
                        : Model::gin({.layers = 2, .in_features = 16, .hidden = 16});
    const Request req = Request::gnn(g, HostTensor::shape_only(g->nodes, 16));
    const Characteristics c = req.characteristics();
    EXPECT_EQ(c.locality.miss, g->locality.miss);
    int spmm = 0;
    for (const auto& sh : m.kernel_shapes(c)) {
      if (sh.kind != kernels::OpKind::spmm) continue;
      EXPECT_EQ(sh.locality.miss, g->locality.miss);
      ++spmm;
    }
    EXPECT_EQ(spmm, 2);
  }
  EXPECT_TRUE(Graph::sage_mean(e)->locality.known());
  EXPECT_FALSE(Graph::shape_only(3000, 30000)->locality.known());
}

TEST(RtModel, KernelChainsFollowTheModelConfigs) {
  EXPECT_EQ(Model::gcn({.layers = 2}).num_kernels(), 4);
  EXPECT_EQ(Model::gin({.layers = 2}).num_kernels(), 6);
  Model t = Model::transformer({.layers = 2, .d_model = 32, .heads = 4, .ffn = 64});
  ASSERT_EQ(t.num_kernels(), 10);
  EXPECT_TRUE(t.step(0).qkv);
  EXPECT_EQ(t.step(1).op, kernels::OpKind::window_attention);
  auto shapes = t.kernel_shapes({.seq_len = 100, .window = 16});
  EXPECT_EQ(shapes[0].n, 96);
  EXPECT_EQ(shapes[1].seq_len, 100);
  EXPECT_EQ(shapes[1].window, 16);
}

TEST(RtModel, RejectsMismatchedRequests) {
  Model m = Model::gcn({.layers = 1, .in_features = 8, .hidden = 4});
  auto g = Graph::from_edges(random_graph(10, 20, 1), true);
  EXPECT_THROW(reference_forward(m, Request::gnn(g, HostTensor::zeros(10, 7))), InputError);
  EXPECT_THROW(reference_forward(m, Request::gnn(g, HostTensor::zeros(9, 8))), InputError);
  EXPECT_THROW(reference_forward(m, Request::transformer(HostTensor::zeros(9, 8), 2)), InputError);
}

TEST(RtPipeline, GcnEveryShapeMatchesReference) {
  auto sys = testing::emu_system(12, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 12, .hidden = 8, .seed = 5});
  check_all_shapes(m, gnn_requests(m, 97, 600, 3), sys);
}

TEST(RtPipeline, GinEveryShapeMatchesReference) {
  auto sys = testing::emu_system(18, 0);
  Model m = Model::gin({.layers = 2, .in_features = 10, .hidden = 8, .gin_eps = 0.25f, .seed = 6});
  check_all_shapes(m, gnn_requests(m, 61, 400, 2), sys);
}

TEST(RtPipeline, TransformerEveryShapeMatchesReference) {
  auto sys = testing::emu_system(15, 0);
  Model m = Model::transformer({.layers = 1, .d_model = 16, .heads = 2, .ffn = 24, .seed = 7});
  check_all_shapes(m, tf_requests(m, 40, 8, 2), sys);
}

TEST(RtPipeline, TwoLayerTransformerAcrossStages) {
  auto sys = testing::emu_system(6, 0);
  auto g = sys.devices_of(hw::DeviceKind::gpu);
  Model m = Model::transformer({.layers = 2, .d_model = 16, .heads = 4, .ffn = 32, .seed = 8});
  PipelineSpec spec{{{0, 3, {g[0], g[1], g[2]}, 0}, {4, 7, {g[3]}, 0}, {8, 9, {g[4], g[5]}, 0}}, ""};
  run_and_check(m, spec, tf_requests(m, 33, 10, 3), describe(spec));
  // Both attentions in one 3-device stage: the second must not reuse rows the first computed
  // over a truncated halo.
  PipelineSpec whole{{{0, 9, {g[0], g[1], g[2]}, 0}}, ""};
  run_and_check(m, whole, tf_requests(m, 33, 10, 2), describe(whole));
}

TEST(RtPipeline, FpgaAndGpuStagesWithPeerTransfers) {
  auto sys = testing::emu_system(2, 3);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  auto fpga = sys.devices_of(hw::DeviceKind::fpga);
  Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 9});
  // 3F2G-style: SpMM on three FPGAs, GEMM + SpMM + GEMM on two GPUs.
  PipelineSpec spec{{{0, 0, {fpga[0], fpga[1], fpga[2]}, 0}, {1, 3, {gpu[0], gpu[1]}, 0}}, "3F2G"};
  run_and_check(m, spec, gnn_requests(m, 150, 1200, 4), "3F2G");
  // 1G -> 1F: a whole-buffer peer copy across sockets.
  PipelineSpec spec2{{{0, 1, {gpu[0]}, 0}, {2, 3, {fpga[0]}, 0}}, "1G1F"};
  std::vector<Request> reqs = gnn_requests(m, 150, 1200, 2);
  run_and_check(m, spec2, reqs, "1G1F");
}

TEST(RtPipeline, RejectsBadSpecs) {
  auto sys = testing::emu_system(2, 1, false, "u280-sextans-swat.yaml");
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  auto fpga = sys.devices_of(hw::DeviceKind::fpga);
  Model m = Model::gcn({.layers = 1, .in_features = 4, .hidden = 4});
  EXPECT_THROW(Pipeline(m, {{{0, 0, {gpu[0]}, 0}, {1, 1, {gpu[0]}, 0}}, ""}), InputError);  // shared device
  EXPECT_THROW(Pipeline(m, {{{0, 0, {gpu[0]}, 0}}, ""}), InputError);                       // gap
  try {
    Pipeline p(m, {{{0, 1, {fpga[0]}, 0}}, ""});  // the SWAT image has no GEMM
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fpga0"), std::string::npos) << e.what();
  }
}

TEST(RtPipeline, BoundedQueuesKeepOrderUnderLoad) {
  auto sys = testing::emu_system(3, 0);
  auto g = sys.devices_of(hw::DeviceKind::gpu);
  Model m = Model::gcn({.layers = 2, .in_features = 8, .hidden = 8, .seed = 2});
  auto reqs = gnn_requests(m, 64, 300, 1);
  auto shared = std::make_shared<Request>(reqs[0]);
  PipelineOptions po;
  po.queue_capacity = 1;
  Pipeline p(m, {{{0, 0, {g[0]}, 0}, {1, 2, {g[1]}, 0}, {3, 3, {g[2]}, 0}}, ""}, po);
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> in_order{true};
  constexpr int kN = 60;
  for (int i = 0; i < kN; ++i) {
    p.submit({.seq = static_cast<std::uint64_t>(i), .request = shared, .not_before_s = 0,
              .done = [&](Completion&& c) {
                if (c.seq != next.fetch_add(1)) in_order = false;
              }});
  }
  p.close();
  p.join();
  EXPECT_EQ(next.load(), static_cast<std::uint64_t>(kN));
  EXPECT_TRUE(in_order.load());
  auto st = p.stats();
  ASSERT_EQ(st.size(), 3u);
  for (const auto& s : st) {
    EXPECT_EQ(s.requests, kN);
    // Bounded: capacity 1, plus the one producer tbb counts while it waits to push.
    EXPECT_LE(s.max_queue_depth, 2);
    EXPECT_GT(s.busy_s, 0.0);
  }
  EXPECT_GT(st[1].transfers.p2p_copies + st[1].transfers.staged_copies, 0);
}

}  // namespace
}  // namespace dype::rt
