// The graph registry's bounds: a byte quota over edges and normalised graphs, idle graphs dropped
// after the TTL (a client stopped mid-stream never deletes its graphs), and the listing.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/graph_registry.h"
#include "../test_temp_dir.h"

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

// One owner may hold only its share, so another client still registers; an address rotating owner
// keys is bounded by the address share; only the owner deletes or lists its graphs.
TEST(GraphRegistry, OwnersHoldOnlyTheirShareAndSeeOnlyTheirGraphs) {
  GraphRegistry r({.max_graphs = 8, .max_bytes = 1 << 20, .idle_ttl_s = 0, .owner_share = 0.25, .address_share = 0.5});
  const GraphOwner alice{"alice", "10.0.0.1"}, bob{"", "10.0.0.2"}, mallory{"m1", "10.0.0.3"};
  const std::string a1 = r.add(ring(3), alice), a2 = r.add(ring(4), alice);
  try {
    r.add(ring(3), alice);
    ADD_FAILURE() << "an owner went past its share";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("this owner key holds 2 graphs, its share of the registry (--graph-owner-share)"),
              std::string::npos)
        << e.what();
  }
  const std::string b1 = r.add(ring(5), bob);  // another client is unaffected
  // Fresh keys from one address: bounded by the address share (4 of 8).
  for (const char* k : {"m1", "m2"}) r.add(ring(3), {k, mallory.address}), r.add(ring(3), {k, mallory.address});
  try {
    r.add(ring(3), {"m3", mallory.address});
    ADD_FAILURE() << "an address went past its share by rotating keys";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("address 10.0.0.3 holds 4 graphs"), std::string::npos) << e.what();
  }

  EXPECT_FALSE(r.remove(a1, &bob));  // not bob's: as unknown
  EXPECT_EQ(r.num_nodes(a1), 3);
  const auto mine = r.list(alice);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_TRUE((mine[0].id == a1 && mine[1].id == a2) || (mine[0].id == a2 && mine[1].id == a1));
  EXPECT_TRUE(mine[0].keyed);
  const auto bobs = r.list(bob);  // known by address, no key
  ASSERT_EQ(bobs.size(), 1u);
  EXPECT_EQ(bobs[0].id, b1);
  EXPECT_FALSE(bobs[0].keyed);
  EXPECT_EQ(bobs[0].address, "10.0.0.2");
  EXPECT_TRUE(r.list({"alice", "10.9.9.9"}).size() == 2u);  // a key is the owner from any address

  const auto gone = r.remove_all(alice);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_TRUE(r.list(alice).empty());
  EXPECT_EQ(r.size(), 5u);
  EXPECT_NO_THROW(r.add(ring(3), alice));  // its share is free again
  EXPECT_TRUE(r.remove(b1, &bob));
}

GraphUpdate edge(std::int64_t s, std::int64_t t) {
  GraphUpdate u;
  u.add_src = {s};
  u.add_dst = {t};
  return u;
}

// A graph registered without features holds its edge list (16 bytes an edge); its first update
// turns it into adjacency lists, about 60 bytes a node. That growth is within the byte quota and
// the owner's share before anything is built: 2^30 nodes and one edge, registered for 16 bytes,
// would otherwise take tens of GiB on the first update, refused or not.
TEST(GraphRegistry, FirstUpdateOfAGraphWithoutFeaturesIsWithinTheQuota) {
  GraphRegistry r({.max_graphs = 8, .max_bytes = 1 << 20, .idle_ttl_s = 0});
  const GraphOwner kim{"kim", "10.0.0.1"};
  kernels::EdgeList wide;
  wide.num_nodes = std::int64_t{1} << 24;  // 16 Mi nodes, one edge: 16 bytes as registered
  wide.src = {0};
  wide.dst = {1};
  const std::string id = r.add(wide, kim);
  EXPECT_EQ(r.bytes(), 16u);
  try {
    r.update(id, kim, edge(2, 3));
    ADD_FAILURE() << "a graph without features took updates past the byte quota";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("registry full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("this graph, to take updates, needs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.bytes(), 16u);  // nothing built, nothing applied
  EXPECT_EQ(r.list(kim).at(0).version, 0u);
  GraphUpdate remove_absent;  // refused by the graph's check: the graph stays as registered
  remove_absent.remove_src = {5};  // the ring has 4 -> 5, not 5 -> 4
  remove_absent.remove_dst = {4};
  const std::string small = r.add(ring(10), kim);
  EXPECT_THROW(r.update(small, kim, remove_absent), InputError);
  EXPECT_EQ(r.bytes(), 16u + 160u);
  EXPECT_EQ(r.update(small, kim, edge(2, 3)).version, 1u);  // within the quota: it converts and applies
  EXPECT_GT(r.bytes(), 16u + 160u);
}

// An owner's share bounds what its graphs grow to through updates, not only what it registers:
// otherwise one client fills the registry by growing one graph and every other registration fails.
TEST(GraphRegistry, UpdatesStayWithinTheOwnersShare) {
  GraphRegistry r({.max_graphs = 8, .max_bytes = 1 << 20, .idle_ttl_s = 0, .owner_share = 0.25, .address_share = 0.5});
  const GraphOwner alice{"alice", "10.0.0.1"}, bob{"bob", "10.0.0.2"};
  const std::string a = r.add(ring(10), alice, make_tensor(10, 64, std::vector<float>(640, 0.5f)));
  GraphUpdate grow;
  grow.add_nodes = 200;
  grow.add_x.assign(200 * 64, 0.25f);
  std::uint64_t version = 0;
  try {
    for (int i = 0; i < 100; ++i) version = r.update(a, alice, grow).version;
    ADD_FAILURE() << "an owner's graph grew past its share";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(--graph-owner-share) and this update needs"), std::string::npos) << e.what();
  }
  EXPECT_GT(version, 0u);
  EXPECT_EQ(r.list(alice).at(0).version, version);  // the refused update applied nothing
  EXPECT_LE(r.bytes(), std::size_t{1} << 18);
  EXPECT_NO_THROW(r.add(ring(10), bob, make_tensor(10, 64, std::vector<float>(640, 0.5f))));  // others still register
  // The graph count of an owner at its share does not stop updates to the graphs it holds.
  GraphRegistry c({.max_graphs = 4, .max_bytes = 1 << 20, .idle_ttl_s = 0, .owner_share = 0.25});
  const std::string only = c.add(ring(10), alice);
  EXPECT_THROW(c.add(ring(10), alice), InputError);
  EXPECT_EQ(c.update(only, alice, edge(0, 5)).version, 1u);
}

// A model reloaded under the same name drops the activations its earlier version kept: their bytes
// leave the bound's count with them, so the new version's fit where the old ones did.
TEST(GraphRegistry, ReloadedModelKeepsActivationsInTheOldOnesPlace) {
  const auto v1 = std::make_shared<const Model>(Model::gcn({.layers = 1, .in_features = 3, .hidden = 2}));
  const auto v2 = std::make_shared<const Model>(Model::gcn({.layers = 1, .in_features = 3, .hidden = 2}));
  const std::size_t one = IncrementalGnn::bytes_for(*v1, 10);
  GraphRegistry r({.max_graphs = 8, .max_bytes = 1 << 20, .idle_ttl_s = 0, .max_activation_bytes = one + one / 2});
  const GraphOwner kim{"kim", "10.0.0.1"};
  const std::string id = r.add(ring(10), kim, make_tensor(10, 3, std::vector<float>(30, 0.5f)));
  ASSERT_TRUE(r.answer_kept(id, "gcn", v1, {}, std::nullopt, nullptr).has_value());
  EXPECT_GT(r.activation_bytes(), 0u);
  EXPECT_TRUE(r.answer_kept(id, "gcn", v2, {}, std::nullopt, nullptr).has_value());  // in the old ones' place
  EXPECT_LE(r.activation_bytes(), one + one / 2);
  EXPECT_EQ(r.list(kim).at(0).activation_bytes, r.activation_bytes());
}

// Graphs that take updates survive a restart through the state directory: the same id, owner,
// version, edges and features; a record cut short by a crash is dropped, a snapshot compacts the
// log, and a deleted graph leaves nothing behind.
TEST(GraphRegistry, UpdatedGraphsComeBackAtTheirLastVersion) {
  const auto dir = test::process_temp_dir("dype-graph-store");
  const GraphOwner kim{"kim", "10.0.0.1"};
  std::string id;
  std::vector<float> x(60 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  kernels::EdgeList before;
  {
    GraphRegistry a;
    a.persist(std::make_shared<GraphStore>(dir));
    id = a.add(ring(60), kim, make_tensor(60, 3, x));
    for (int i = 0; i < 10; ++i) {
      GraphUpdate u;
      u.add_src = {i};
      u.add_dst = {59 - i};
      if (i == 3) {
        u.remove_src = {0};
        u.remove_dst = {1};
        u.add_nodes = 1;
        u.add_x = {7, 8, 9};
      }
      EXPECT_EQ(a.update(id, kim, u).version, static_cast<std::uint64_t>(i + 1));
    }
  }
  // A crash in the middle of writing an eleventh update: its record is cut short.
  std::ofstream(dir / "graphs" / id / "updates.log", std::ios::app | std::ios::binary) << "DYPEUPD1\x0b";
  GraphRegistry b;
  const std::vector<std::string> log = b.persist(std::make_shared<GraphStore>(dir));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("restored at version 10: 61 nodes, 69 edges, 3 features"), std::string::npos) << log[0];
  const std::vector<GraphSummary> listed = b.list(kim);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, id);
  EXPECT_EQ(listed[0].version, 10u);
  const Model gcn = Model::gcn({.layers = 1, .in_features = 3, .hidden = 2});
  const GraphRegistry::Stored s = b.stored(id, gcn, 10);
  EXPECT_EQ(s.x.rows, 61);
  EXPECT_EQ(s.x.data[60 * 3 + 2], 9.0f);
  EXPECT_EQ(s.x.data[5], 2.5f);
  EXPECT_THROW(b.update(id, {"eve", "10.0.0.2"}, edge(0, 1)), NotFound);
  EXPECT_EQ(b.update(id, kim, edge(0, 1)).version, 11u);
  // Compaction: past GraphStore::kCompactAfter updates the log starts afresh from a new snapshot.
  for (int i = 0; i < GraphStore::kCompactAfter; ++i) b.update(id, kim, edge(1, 2));
  EXPECT_LT(std::filesystem::file_size(dir / "graphs" / id / "updates.log"), 200u * 64);
  {
    GraphRegistry c;
    c.persist(std::make_shared<GraphStore>(dir));
    EXPECT_EQ(c.list(kim).at(0).version, static_cast<std::uint64_t>(11 + GraphStore::kCompactAfter));
    EXPECT_EQ(c.list(kim).at(0).edges, 70 + GraphStore::kCompactAfter);
    EXPECT_TRUE(c.remove(id, &kim));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "graphs" / id));
  GraphRegistry d;
  EXPECT_TRUE(d.persist(std::make_shared<GraphStore>(dir)).empty());
  EXPECT_EQ(d.size(), 0u);
  // The snapshots hold owner keys: the folder is this user's only.
  const auto perms = std::filesystem::status(dir / "graphs").permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
}

// The value of the sample `series` (name and labels as written) in a text exposition; -1 if absent.
double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

// What the registry's Prometheus lines count, each fed by the registry's own operations.
TEST(GraphRegistry, MetricsCountRegistrationsLookupsAndRemovals) {
  GraphRegistry r({.max_graphs = 2, .max_bytes = 1 << 20, .idle_ttl_s = 0.2});
  const Model gcn = Model::gcn({.layers = 1, .in_features = 4, .hidden = 4});
  const std::string a = r.add(ring(5)), b = r.add(ring(6));
  EXPECT_THROW(r.add(ring(3)), InputError);  // full: refused
  r.graph_for(a, gcn);
  r.graph_for(a, gcn);
  EXPECT_THROW(r.graph_for("gnosuch", gcn), NotFound);
  std::string text = r.metrics_text();
  EXPECT_EQ(sample(text, "dype_graph_registry_graphs"), 2);
  EXPECT_EQ(sample(text, "dype_graph_registry_max_graphs"), 2);
  EXPECT_EQ(sample(text, "dype_graph_registry_bytes"), static_cast<double>(r.bytes()));
  EXPECT_EQ(sample(text, "dype_graph_registry_max_bytes"), 1 << 20);
  EXPECT_EQ(sample(text, "dype_graph_activation_bytes"), 0);
  EXPECT_EQ(sample(text, "dype_graph_activation_bytes_limit"), static_cast<double>(r.limits().max_activation_bytes));
  EXPECT_EQ(sample(text, "dype_graph_registrations_total{outcome=\"accepted\"}"), 2);
  EXPECT_EQ(sample(text, "dype_graph_registrations_total{outcome=\"refused\"}"), 1);
  EXPECT_EQ(sample(text, "dype_graph_lookups_total{result=\"hit\"}"), 2);
  EXPECT_EQ(sample(text, "dype_graph_lookups_total{result=\"miss\"}"), 1);
  EXPECT_NE(text.find("# TYPE dype_graph_lookups_total counter\n"), std::string::npos) << text;

  EXPECT_TRUE(r.remove(b));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a, unused, expires
  text = r.metrics_text();
  EXPECT_EQ(sample(text, "dype_graph_registry_graphs"), 0);
  EXPECT_EQ(sample(text, "dype_graph_registry_bytes"), 0);
  EXPECT_EQ(sample(text, "dype_graphs_removed_total{cause=\"deleted\"}"), 1);
  EXPECT_EQ(sample(text, "dype_graphs_removed_total{cause=\"expired\"}"), 1);
}

}  // namespace
}  // namespace dype::rt::daemon
