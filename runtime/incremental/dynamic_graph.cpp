#include "runtime/incremental/dynamic_graph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "common/error.h"

namespace dype::rt {

namespace {
constexpr std::int64_t kMaxNodes = std::int64_t{1} << 30;  // as Graph::from_edges

std::string at(const char* field, std::size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

void check_finite(const std::vector<float>& x, const char* field) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i])) throw InputError(at(field, i), "is not a finite number");
}
}  // namespace

int DynamicGraph::add(Adjacency& a, std::int32_t node, std::int32_t count) {
  auto it = std::lower_bound(a.begin(), a.end(), node,
                             [](const auto& p, std::int32_t v) { return p.first < v; });
  if (it != a.end() && it->first == node) {
    it->second += count;
    if (it->second != 0) return 0;
    a.erase(it);
    return -1;
  }
  a.insert(it, {node, count});
  return 1;
}

std::int32_t DynamicGraph::count(const Adjacency& a, std::int32_t node) {
  auto it = std::lower_bound(a.begin(), a.end(), node,
                             [](const auto& p, std::int32_t v) { return p.first < v; });
  return it != a.end() && it->first == node ? it->second : 0;
}

DynamicGraph::DynamicGraph(const kernels::EdgeList& edges, HostTensor x) : x_(std::move(x)) {
  const std::int64_t n = edges.num_nodes;
  if (n <= 0 || n > kMaxNodes) throw InputError("graph.num_nodes", "must be in [1, 2^30]");
  if (!edges.weight.empty())
    throw InputError("edge_weight", "a graph that takes updates has no edge weights");
  if (x_.cols > 0 && x_.rows != n)
    throw InputError(
        "x", "has " + std::to_string(x_.rows) + " rows, the graph " + std::to_string(n) + " nodes");
  if (x_.cols > 0) check_finite(x_.data, "x");
  in_.resize(static_cast<std::size_t>(n));
  out_.resize(static_cast<std::size_t>(n));
  in_deg_.assign(static_cast<std::size_t>(n), 0);
  loops_.assign(static_cast<std::size_t>(n), 0);
  // Bucketed by target, then sorted and merged per node: one pass, no per-edge inserts.
  std::vector<std::int64_t> start(static_cast<std::size_t>(n) + 1, 0), ostart(start);
  for (std::int64_t e = 0; e < edges.num_edges(); ++e) {
    const auto s = edges.src[e], d = edges.dst[e];
    if (s < 0 || s >= n || d < 0 || d >= n)
      throw InputError("graph.edge[" + std::to_string(e) + "]",
                       "node id out of [0, " + std::to_string(n) + ")");
    ++start[d + 1];
    ++ostart[s + 1];
  }
  for (std::int64_t i = 0; i < n; ++i) start[i + 1] += start[i], ostart[i + 1] += ostart[i];
  std::vector<std::int32_t> by_dst(static_cast<std::size_t>(edges.num_edges())),
      by_src(by_dst.size());
  {
    std::vector<std::int64_t> f(start.begin(), start.end() - 1),
        g(ostart.begin(), ostart.end() - 1);
    for (std::int64_t e = 0; e < edges.num_edges(); ++e) {
      by_dst[f[edges.dst[e]]++] = static_cast<std::int32_t>(edges.src[e]);
      by_src[g[edges.src[e]]++] = static_cast<std::int32_t>(edges.dst[e]);
    }
  }
  auto fill = [](std::vector<std::int32_t>& v, std::int64_t b, std::int64_t e, Adjacency& a) {
    std::sort(v.begin() + b, v.begin() + e);
    for (std::int64_t i = b; i < e;) {
      std::int64_t j = i;
      while (j < e && v[j] == v[i]) ++j;
      a.emplace_back(v[i], static_cast<std::int32_t>(j - i));
      i = j;
    }
  };
  for (std::int64_t i = 0; i < n; ++i) {
    fill(by_dst, start[i], start[i + 1], in_[i]);
    fill(by_src, ostart[i], ostart[i + 1], out_[i]);
    in_deg_[i] = start[i + 1] - start[i];
    loops_[i] = count(in_[i], static_cast<std::int32_t>(i));
    pairs_ += static_cast<std::int64_t>(in_[i].size() + out_[i].size());
  }
  edges_ = edges.num_edges();
}

void DynamicGraph::check(const GraphUpdate& u) const {
  const std::int64_t n = nodes();
  if (u.add_nodes < 0) throw InputError("add_nodes", "is negative");
  if (u.add_nodes > kMaxNodes - n)
    throw InputError("add_nodes", "would make the graph more than 2^30 nodes");
  const std::int64_t m = n + u.add_nodes;
  const std::int64_t f = x_.cols;
  if (u.add_src.size() != u.add_dst.size())
    throw InputError("add_edges", "sources and targets differ in number");
  if (u.remove_src.size() != u.remove_dst.size())
    throw InputError("remove_edges", "sources and targets differ in number");
  if (f == 0 && (!u.add_x.empty() || !u.set_rows.empty()))
    throw InputError(u.set_rows.empty() ? "add_nodes" : "set_rows",
                     "this graph was registered without features");
  if (u.changes() == 0)
    throw InputError("inputs", "an update needs add_edges, remove_edges, add_nodes or set_rows");
  if (f > 0 && static_cast<std::int64_t>(u.add_x.size()) != u.add_nodes * f)
    throw InputError("add_nodes", "new nodes need " + std::to_string(u.add_nodes) + " rows of " +
                                      std::to_string(f) + " features (" +
                                      std::to_string(u.add_nodes * f) + " values), got " +
                                      std::to_string(u.add_x.size()) + " values");
  if (static_cast<std::int64_t>(u.set_x.size()) != static_cast<std::int64_t>(u.set_rows.size()) * f)
    throw InputError("x", "rows of the wrong width: " + std::to_string(u.set_rows.size()) +
                              " rows of " + std::to_string(f) + " features need " +
                              std::to_string(u.set_rows.size() * f) + " values, got " +
                              std::to_string(u.set_x.size()));
  check_finite(u.add_x, "add_nodes");
  check_finite(u.set_x, "x");
  std::vector<std::int64_t> rows(u.set_rows);
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= m)
      throw InputError(at("set_rows", i), "node " + std::to_string(rows[i]) + " out of range [0, " +
                                              std::to_string(m) + ")");
  std::sort(rows.begin(), rows.end());
  if (std::adjacent_find(rows.begin(), rows.end()) != rows.end())
    throw InputError(
        "set_rows",
        "names node " + std::to_string(*std::adjacent_find(rows.begin(), rows.end())) + " twice");
  auto check_ids = [](const std::vector<std::int64_t>& v, const char* field, int side,
                      std::int64_t limit) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] < 0 || v[i] >= limit)
        throw InputError(
            std::string(field) + "[" + std::to_string(side) + "][" + std::to_string(i) + "]",
            "node " + std::to_string(v[i]) + " out of range [0, " + std::to_string(limit) + ")");
  };
  check_ids(u.remove_src, "remove_edges", 0, n);
  check_ids(u.remove_dst, "remove_edges", 1, n);
  check_ids(u.add_src, "add_edges", 0, m);
  check_ids(u.add_dst, "add_edges", 1, m);
  // Every removal takes one occurrence: k removals of s -> t need k edges s -> t.
  std::map<std::pair<std::int64_t, std::int64_t>, std::pair<std::int32_t, std::size_t>>
      wanted;  // -> (count, first i)
  for (std::size_t i = 0; i < u.remove_src.size(); ++i) {
    auto [it, fresh] = wanted.try_emplace({u.remove_src[i], u.remove_dst[i]}, 0, i);
    ++it->second.first;
  }
  for (const auto& [edge, need] : wanted) {
    const std::int32_t have =
        count(in_[static_cast<std::size_t>(edge.second)], static_cast<std::int32_t>(edge.first));
    if (have < need.first)
      throw InputError(at("remove_edges", need.second),
                       "edge " + std::to_string(edge.first) + " -> " + std::to_string(edge.second) +
                           " is not in the graph" +
                           (have > 0 ? " " + std::to_string(need.first) + " times (it is there " +
                                           std::to_string(have) + ")"
                                     : ""));
  }
}

namespace {
// Room for `need` elements, growing geometrically as push_back would: an exact reserve per update
// would copy a vector whole on every update that grows it (quadratic over a stream).
template <class V>
void make_room(V& v, std::size_t need) {
  if (need > v.capacity()) v.reserve(std::max(need, 2 * v.capacity()));
}
}  // namespace

GraphChange DynamicGraph::apply(const GraphUpdate& u) {
  check(u);
  GraphChange c;
  c.old_nodes = nodes();
  c.new_nodes = nodes() + u.add_nodes;
  const auto m = static_cast<std::size_t>(c.new_nodes);
  // Every allocation first: past them nothing throws, so an apply that runs out of memory leaves
  // the graph as it was (the update's log record is then taken back, and a replay agrees).
  c.edges.reserve(u.remove_src.size() + u.add_src.size());
  c.feature_rows.reserve(u.set_rows.size() + static_cast<std::size_t>(u.add_nodes));
  make_room(in_, m);
  make_room(out_, m);
  make_room(in_deg_, m);
  make_room(loops_, m);
  if (x_.cols > 0) make_room(x_.data, x_.data.size() + u.add_x.size());
  std::vector<Adjacency> new_in(static_cast<std::size_t>(u.add_nodes)), new_out(new_in.size());
  {
    // Each added edge may add a pair to its target's in-list and its source's out-list.
    std::vector<std::int64_t> dsts(u.add_dst), srcs(u.add_src);
    std::sort(dsts.begin(), dsts.end());
    std::sort(srcs.begin(), srcs.end());
    auto grow = [&](std::vector<std::int64_t>& ids, std::vector<Adjacency>& old_lists,
                    std::vector<Adjacency>& fresh) {
      for (std::size_t i = 0; i < ids.size();) {
        std::size_t j = i;
        while (j < ids.size() && ids[j] == ids[i]) ++j;
        Adjacency& a = ids[i] < c.old_nodes ? old_lists[static_cast<std::size_t>(ids[i])]
                                            : fresh[static_cast<std::size_t>(ids[i] - c.old_nodes)];
        make_room(a, a.size() + (j - i));
        i = j;
      }
    };
    grow(dsts, in_, new_in);
    grow(srcs, out_, new_out);
  }
  for (std::size_t i = 0; i < new_in.size(); ++i) {  // moves into reserved room: no allocation
    in_.push_back(std::move(new_in[i]));
    out_.push_back(std::move(new_out[i]));
  }
  in_deg_.resize(m, 0);
  loops_.resize(m, 0);
  const std::int64_t f = x_.cols;
  if (f > 0) {
    x_.data.insert(x_.data.end(), u.add_x.begin(), u.add_x.end());
    x_.rows = c.new_nodes;
    for (std::size_t i = 0; i < u.set_rows.size(); ++i)
      std::copy_n(u.set_x.begin() + static_cast<std::ptrdiff_t>(i * f), f,
                  x_.data.begin() + u.set_rows[i] * f);
  }
  for (const std::int64_t r : u.set_rows) c.feature_rows.push_back(static_cast<std::int32_t>(r));
  for (std::int64_t r = c.old_nodes; r < c.new_nodes; ++r)
    c.feature_rows.push_back(static_cast<std::int32_t>(r));
  std::sort(c.feature_rows.begin(), c.feature_rows.end());
  c.feature_rows.erase(std::unique(c.feature_rows.begin(), c.feature_rows.end()),
                       c.feature_rows.end());
  auto change = [&](std::int64_t s, std::int64_t d, std::int32_t delta) {
    const auto si = static_cast<std::int32_t>(s), di = static_cast<std::int32_t>(d);
    pairs_ += add(in_[d], si, delta) + add(out_[s], di, delta);
    in_deg_[d] += delta;
    if (s == d) loops_[d] += delta;
    edges_ += delta;
    c.edges.push_back({si, di, delta});
  };
  for (std::size_t i = 0; i < u.remove_src.size(); ++i)
    change(u.remove_src[i], u.remove_dst[i], -1);
  for (std::size_t i = 0; i < u.add_src.size(); ++i) change(u.add_src[i], u.add_dst[i], +1);
  ++version_;
  return c;
}

kernels::EdgeList DynamicGraph::edge_list() const {
  kernels::EdgeList e;
  e.num_nodes = nodes();
  e.src.reserve(static_cast<std::size_t>(edges_));
  e.dst.reserve(static_cast<std::size_t>(edges_));
  for (std::int64_t d = 0; d < nodes(); ++d)
    for (const auto& [s, k] : in_[d])
      for (std::int32_t i = 0; i < k; ++i) {
        e.src.push_back(s);
        e.dst.push_back(d);
      }
  return e;
}

std::size_t DynamicGraph::bytes_for(std::int64_t nodes, std::int64_t edges, std::int64_t features) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(nodes, 0));
  const auto e = static_cast<std::size_t>(std::max<std::int64_t>(edges, 0));
  return n * static_cast<std::size_t>(std::max<std::int64_t>(features, 0)) * sizeof(float) +
         n * (2 * sizeof(Adjacency) + sizeof(std::int64_t) + sizeof(std::int32_t)) +
         2 * e * sizeof(Adjacency::value_type);
}

std::size_t DynamicGraph::bytes() const {
  const auto n = static_cast<std::size_t>(nodes());
  return x_.data.size() * sizeof(float) +
         n * (2 * sizeof(Adjacency) + sizeof(std::int64_t) + sizeof(std::int32_t)) +
         static_cast<std::size_t>(pairs_) * sizeof(Adjacency::value_type);
}

}  // namespace dype::rt
