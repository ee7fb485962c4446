// The graph registry's bounds: a byte quota over edges and normalised graphs, idle graphs dropped
// after the TTL (a client stopped mid-stream never deletes its graphs), and the listing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "kernels/error.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/graph_registry.h"

namespace dype::rt::daemon {
namespace {

kernels::EdgeList ring(std::int64_t n) {
  kernels::EdgeList e;
  e.num_nodes = n;
  for (std::int64_t i = 0; i < n; ++i) {
    e.src.push_back(i);
    e.dst.push_back((i + 1) % n);
  }
  return e;
}

TEST(GraphRegistry, ByteQuotaCountsEdgesAndNormalisedGraphs) {
  GraphRegistry r({.max_graphs = 10, .max_bytes = 1000, .idle_ttl_s = 0});
  const std::string a = r.add(ring(50));  // 50 edges x 16 bytes
  EXPECT_EQ(r.bytes(), 800u);
  try {
    r.add(ring(20));
    ADD_FAILURE() << "over the byte quota";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("registry full: it holds 800 bytes of 1000 bytes and this graph needs 320 bytes"),
              std::string::npos)
        << e.what();
  }
  const Model gcn = Model::gcn({.layers = 1, .in_features = 4, .hidden = 4});
  r.graph_for(a, gcn);  // the normalised CSR counts too: 51 indptr + 100 indices + 100 values
  EXPECT_EQ(r.bytes(), 800u + 51 * 4 + 100 * 4 + 100 * 4);
  EXPECT_TRUE(r.remove(a));
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_NO_THROW(r.add(ring(20)));
}

TEST(GraphRegistry, IdleGraphsAreDroppedAndUseKeepsThemAlive) {
  GraphRegistry r({.max_graphs = 10, .max_bytes = 1 << 20, .idle_ttl_s = 0.3});
  const std::string idle = r.add(ring(5));
  const std::string used = r.add(ring(6));
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    EXPECT_EQ(r.num_nodes(used), 6);  // touched every 120 ms: stays
  }
  try {
    r.num_nodes(idle);
    ADD_FAILURE() << "an idle graph outlived its TTL";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("graphs unused for 0.3 s are dropped"), std::string::npos) << e.what();
  }
  const auto listed = r.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, used);
  EXPECT_EQ(listed[0].nodes, 6);
  EXPECT_EQ(listed[0].edges, 6);
  EXPECT_LT(listed[0].idle_s, 0.3);
  EXPECT_EQ(r.bytes(), 6u * 16);
}

TEST(GraphRegistry, CountLimitStillHolds) {
  GraphRegistry r({.max_graphs = 2, .max_bytes = 1 << 20, .idle_ttl_s = 0});
  r.add(ring(3));
  r.add(ring(3));
  EXPECT_THROW(r.add(ring(3)), InputError);
}

}  // namespace
}  // namespace dype::rt::daemon
