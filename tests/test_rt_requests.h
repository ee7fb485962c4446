#pragma once
// Shared by the runtime tests that run whole pipelines (tests/unit/test_rt_pipeline.cpp,
// tests/integration/test_gpu_pipeline.cpp, test_remote_stages.cpp): every cut of a kernel chain,
// generated requests and the check that a pipeline answers each of them, in order, as the
// single-device CPU reference does.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "graph/generators.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"

namespace dype::rt::testing {

// All ways to cut n kernels into contiguous stages (bit i set: cut after kernel i).
inline std::vector<std::vector<std::pair<int, int>>> all_splits(int n) {
  std::vector<std::vector<std::pair<int, int>>> out;
  for (unsigned mask = 0; mask < (1u << (n - 1)); ++mask) {
    std::vector<std::pair<int, int>> st;
    int first = 0;
    for (int k = 0; k < n; ++k) {
      if (k == n - 1 || (mask >> k) & 1u) {
        st.emplace_back(first, k);
        first = k + 1;
      }
    }
    out.push_back(st);
  }
  return out;
}

// `count` requests on one random graph (seeded), features seeded per request.
inline std::vector<Request> gnn_requests(const Model& m, std::int64_t nodes, std::int64_t edges, int count,
                                         std::uint64_t graph_seed = 11, std::uint64_t feature_seed = 100) {
  auto g = Graph::from_edges(random_graph(nodes, edges, graph_seed), m.family() == ModelFamily::gcn, m.spec().gin_eps);
  std::vector<Request> out;
  for (int i = 0; i < count; ++i)
    out.push_back(Request::gnn(g, make_tensor(nodes, m.spec().in_features,
                                              kernels::generate_features(nodes, m.spec().in_features, feature_seed + i))));
  return out;
}

inline std::vector<Request> tf_requests(const Model& m, std::int64_t seq, std::int64_t window, int count,
                                        std::uint64_t seed = 200) {
  std::vector<Request> out;
  for (int i = 0; i < count; ++i)
    out.push_back(Request::transformer(
        make_tensor(seq, m.spec().d_model, kernels::generate_features(seq, m.spec().d_model, seed + i)), window));
  return out;
}

// Runs `reqs` through a pipeline of `spec` and checks each answer against reference_forward, in
// submission order, within `tolerance` relative error.
inline void expect_pipeline_matches_reference(const Model& m, PipelineSpec spec, const std::vector<Request>& reqs,
                                              const std::string& what, double tolerance,
                                              std::size_t queue_capacity = 1) {
  std::vector<HostTensor> expect;
  for (const auto& r : reqs) expect.push_back(reference_forward(m, r));
  std::mutex mu;
  std::vector<Completion> got;
  {
    PipelineOptions po;
    po.queue_capacity = queue_capacity;
    po.preload_graph = reqs[0].graph();
    Pipeline p(m, spec, po);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      p.submit({.seq = i, .request = std::make_shared<Request>(reqs[i]), .not_before_s = 0,
                .done = [&](Completion&& c) {
                  std::lock_guard lock(mu);
                  got.push_back(std::move(c));
                }});
    }
    p.close();
    p.join();
  }
  ASSERT_EQ(got.size(), reqs.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].seq, i) << what << ": completions out of order";
    ASSERT_FALSE(got[i].error) << what << " request " << i;
    EXPECT_LE(relative_error(got[i].output, expect[i]), tolerance) << what << " request " << i;
  }
}

}  // namespace dype::rt::testing
