// Graphs as the runtime holds them (declared in runtime/model.h): CSR built from edge lists the way
// each model family wants its adjacency, and shape-only graphs for timing-only runs.
#include "runtime/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "common/error.h"
#include "graph/characteristics.h"
#include "graph/gather_locality.h"
#include "graph/generators.h"

namespace dype::rt {

namespace {
std::atomic<std::uint64_t> next_graph_id{1};
}

std::uint64_t Graph::fresh_id() { return next_graph_id++; }

kernels::EdgeList random_graph(std::int64_t nodes, std::int64_t edges, std::uint64_t seed) {
  kernels::Xoshiro256 rng(seed);
  kernels::EdgeList g;
  g.num_nodes = nodes;
  g.src.reserve(static_cast<std::size_t>(edges));
  g.dst.reserve(static_cast<std::size_t>(edges));
  for (std::int64_t e = 0; e < edges; ++e) {
    g.src.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(nodes))));
    g.dst.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(nodes))));
  }
  return g;
}

namespace {
// (column, weight) entries in (column, weight) order: the repeats of one column in a row, usually
// a handful, where an insertion sort beats std::sort's set-up several times over.
void sort_run(std::pair<std::int32_t, float>* v, std::int64_t len) {
  if (len > 24) {
    std::sort(v, v + len);
    return;
  }
  for (std::int64_t i = 1; i < len; ++i) {
    const auto x = v[i];
    std::int64_t j = i;
    for (; j > 0 && x < v[j - 1]; --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

// A graph without edges counts as regular (1), as Graph::degree_skew's default says.
double skew_of(const std::vector<std::int32_t>& indptr) {
  return (indptr.size() < 2 || indptr.back() == 0) ? 1.0 : kernels::degree_skew(indptr);
}
}  // namespace

std::shared_ptr<const Graph> Graph::from_edges(const kernels::EdgeList& edges, bool gcn_norm,
                                               float gin_eps) {
  const std::int64_t n = edges.num_nodes;
  if (n <= 0 || n > (std::int64_t{1} << 30)) throw InputError("graph.num_nodes", "must be in [1, 2^30]");
  // Row r aggregates its in-neighbours: entry (dst, src). Duplicates merge by summing weights.
  // Built by two counting passes, no comparison sort: edges (and one self loop per node) are
  // bucketed by source, then the buckets are walked in source order and scattered to their
  // destination rows, so every row comes out ordered by column. Rows live in one array (a vector
  // per row cost ~900 us of allocations for 1k nodes / 10k edges on each daemon request that sends
  // its graph; sorting each row cost most of the rest).
  using Entry = std::pair<std::int32_t, float>;
  const std::int64_t num_edges = edges.num_edges();
  std::vector<std::int64_t> start(static_cast<std::size_t>(n) + 1, 0);  // rows (by destination)
  std::vector<std::int64_t> by_src(static_cast<std::size_t>(n) + 1, 0);
  // GCN adds self loops the way PyG's gcn_norm does (add_remaining_self_loops): a node's own loop
  // edges are replaced by one loop carrying the last one's weight, 1 where it had none. GIN keeps
  // loop edges as neighbours beside its (1 + eps) x_i, as GINConv does.
  std::vector<float> loop_weight(gcn_norm ? static_cast<std::size_t>(n) : 0, 1.0f);
  auto dropped = [&](std::int64_t e) { return gcn_norm && edges.src[e] == edges.dst[e]; };
  for (std::int64_t e = 0; e < num_edges; ++e) {
    const auto s = edges.src[e], d = edges.dst[e];
    if (s < 0 || s >= n || d < 0 || d >= n) {
      throw InputError("graph.edge[" + std::to_string(e) + "]", "node id out of [0, " + std::to_string(n) + ")");
    }
    if (dropped(e)) {
      loop_weight[s] = edges.weight.empty() ? 1.0f : edges.weight[e];
      continue;
    }
    ++start[d + 1];
    ++by_src[s + 1];
  }
  for (std::int64_t r = 0; r < n; ++r) {  // + 1 each: the self loop
    start[r + 1] += start[r] + 1;
    by_src[r + 1] += by_src[r] + 1;
  }
  const float self_weight = gcn_norm ? 1.0f : 1.0f + gin_eps;
  std::vector<Entry> bucket(static_cast<std::size_t>(by_src[n]));  // (destination, weight) by source
  {
    std::vector<std::int64_t> fill(by_src.begin(), by_src.end() - 1);
    for (std::int64_t e = 0; e < num_edges; ++e) {
      if (dropped(e)) continue;
      bucket[fill[edges.src[e]]++] = {static_cast<std::int32_t>(edges.dst[e]), edges.weight.empty() ? 1.0f : edges.weight[e]};
    }
    for (std::int64_t r = 0; r < n; ++r)
      bucket[fill[r]++] = {static_cast<std::int32_t>(r), gcn_norm ? loop_weight[r] : self_weight};
  }
  std::vector<Entry> entries(static_cast<std::size_t>(start[n]));
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t s = 0; s < n; ++s)
      for (std::int64_t k = by_src[s]; k < by_src[s + 1]; ++k)
        entries[fill[bucket[k].first]++] = {static_cast<std::int32_t>(s), bucket[k].second};
  }
  auto g = std::make_shared<Graph>();
  g->id = next_graph_id++;
  g->nodes = n;
  g->indptr.resize(static_cast<std::size_t>(n) + 1, 0);
  // Each row's repeats of one column merged in place, summed in ascending weight order (so the sums
  // do not depend on the order edges were given in; two terms add the same either way, so only
  // runs of three or more are sorted); its merged length goes to indptr.
  for (std::int64_t r = 0; r < n; ++r) {
    Entry* v = entries.data() + start[r];
    const std::int64_t len = start[r + 1] - start[r];
    std::int64_t out = 0;
    for (std::int64_t i = 0; i < len;) {
      std::int64_t j = i + 1;
      while (j < len && v[j].first == v[i].first) ++j;
      if (j - i > 2) sort_run(v + i, j - i);
      float sum = v[i].second;
      for (std::int64_t k = i + 1; k < j; ++k) sum += v[k].second;
      v[out++] = {v[i].first, sum};
      i = j;
    }
    g->indptr[r + 1] = g->indptr[r] + static_cast<std::int32_t>(out);
  }
  g->nnz = g->indptr.back();
  g->indices.resize(static_cast<std::size_t>(g->nnz));
  g->values.resize(static_cast<std::size_t>(g->nnz));
  auto row = [&](std::int64_t r) {
    const Entry* v = entries.data() + start[r];
    return std::span<const Entry>(v, static_cast<std::size_t>(g->indptr[r + 1] - g->indptr[r]));
  };
  // GCN: w / sqrt(deg_r deg_c) as w * deg_r^-1/2 * deg_c^-1/2, one square root per node instead of
  // one per entry (in double, so the float values agree with the per-entry form to the last bit but
  // for rare rounding ties).
  std::vector<double> inv_sqrt(gcn_norm ? static_cast<std::size_t>(n) : 0, 0.0);
  if (gcn_norm) {
    for (std::int64_t r = 0; r < n; ++r) {
      double deg = 0.0;
      for (const auto& [c, w] : row(r)) deg += w;
      inv_sqrt[r] = 1.0 / std::sqrt(deg);
    }
  }
  std::int32_t* out_idx = g->indices.data();
  float* out_val = g->values.data();
  for (std::int64_t r = 0; r < n; ++r) {
    for (const auto& [c, w] : row(r)) {
      *out_idx++ = c;
      *out_val++ = gcn_norm ? static_cast<float>(static_cast<double>(w) * inv_sqrt[r] * inv_sqrt[c]) : w;
    }
  }
  g->degree_skew = skew_of(g->indptr);
  g->locality = kernels::gather_locality(g->indices, g->nodes);
  return g;
}

std::shared_ptr<const Graph> Graph::sage_mean(const kernels::EdgeList& edges) {
  const std::int64_t n = edges.num_nodes;
  if (n <= 0 || n > (std::int64_t{1} << 29)) throw InputError("graph.num_nodes", "must be in [1, 2^29]");
  // Each node's in-neighbours as (source, multiplicity), merged: mean = multiplicity / in-degree.
  std::vector<std::int64_t> deg(static_cast<std::size_t>(n), 0);
  for (std::int64_t e = 0; e < edges.num_edges(); ++e) {
    const auto s = edges.src[e], d = edges.dst[e];
    if (s < 0 || s >= n || d < 0 || d >= n) {
      throw InputError("graph.edge[" + std::to_string(e) + "]", "node id out of [0, " + std::to_string(n) + ")");
    }
    ++deg[static_cast<std::size_t>(d)];
  }
  std::vector<std::int64_t> start(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) start[i + 1] = start[i] + deg[i];
  std::vector<std::int32_t> cols(static_cast<std::size_t>(start[n]));
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t e = 0; e < edges.num_edges(); ++e) cols[fill[edges.dst[e]]++] = static_cast<std::int32_t>(edges.src[e]);
  }
  auto g = std::make_shared<Graph>();
  g->id = next_graph_id++;
  g->nodes = n;
  g->rows_per_node = 2;
  g->indptr.assign(1, 0);
  g->indptr.reserve(static_cast<std::size_t>(2 * n) + 1);
  for (std::int64_t i = 0; i < n; ++i) {
    auto* b = cols.data() + start[i];
    auto* e = cols.data() + start[i + 1];
    std::sort(b, e);
    const float inv = deg[i] > 0 ? 1.0f / static_cast<float>(deg[i]) : 0.0f;
    for (auto* p = b; p < e;) {
      auto* q = p;
      while (q < e && *q == *p) ++q;
      g->indices.push_back(*p);
      g->values.push_back(static_cast<float>(q - p) * inv);
      p = q;
    }
    g->indptr.push_back(static_cast<std::int32_t>(g->indices.size()));
    g->indices.push_back(static_cast<std::int32_t>(i));  // row 2i + 1: the node itself
    g->values.push_back(1.0f);
    g->indptr.push_back(static_cast<std::int32_t>(g->indices.size()));
  }
  g->nnz = static_cast<std::int64_t>(g->indices.size());
  g->degree_skew = skew_of(g->indptr);
  g->locality = kernels::gather_locality(g->indices, g->nodes);
  return g;
}

std::shared_ptr<const Graph> graph_for_model(const kernels::EdgeList& edges, const ModelSpec& spec) {
  switch (spec.family) {
    case ModelFamily::gcn: return Graph::from_edges(edges, true);
    case ModelFamily::gin: return Graph::from_edges(edges, false, spec.gin_eps);
    case ModelFamily::sage: return Graph::sage_mean(edges);
    case ModelFamily::transformer: break;
  }
  throw InputError("graph", "a transformer takes token sequences, not graphs");
}

std::shared_ptr<const Graph> Graph::block_diagonal(const std::vector<std::shared_ptr<const Graph>>& parts) {
  if (parts.empty()) throw InputError("graphs", "nothing to batch");
  std::int64_t nodes = 0, nnz = 0;
  for (const auto& p : parts) {
    if (p->size_only() || p->rows_per_node != parts.front()->rows_per_node)
      throw InputError("graphs", "batched graphs must all be whole graphs of one layout");
    nodes += p->nodes;
    nnz += p->nnz;
  }
  if (nnz >= (std::int64_t{1} << 31) || nodes * parts.front()->rows_per_node >= (std::int64_t{1} << 31))
    throw InputError("graphs", "the batch has 2^31 entries or more");
  auto g = std::make_shared<Graph>();
  g->id = next_graph_id++;
  g->nodes = nodes;
  g->nnz = nnz;
  g->rows_per_node = parts.front()->rows_per_node;
  g->indptr.reserve(static_cast<std::size_t>(g->csr_rows()) + 1);
  g->indices.reserve(static_cast<std::size_t>(nnz));
  g->values.reserve(static_cast<std::size_t>(nnz));
  g->indptr.push_back(0);
  std::int32_t node_base = 0, entry_base = 0;
  for (const auto& p : parts) {
    for (std::size_t r = 1; r < p->indptr.size(); ++r) g->indptr.push_back(entry_base + p->indptr[r]);
    for (const std::int32_t c : p->indices) g->indices.push_back(node_base + c);
    g->values.insert(g->values.end(), p->values.begin(), p->values.end());
    node_base += static_cast<std::int32_t>(p->nodes);
    entry_base += static_cast<std::int32_t>(p->nnz);
  }
  g->degree_skew = skew_of(g->indptr);
  g->locality = kernels::gather_locality(g->indices, g->nodes);
  return g;
}

std::shared_ptr<const Graph> Graph::shape_only(std::int64_t nodes, std::int64_t nnz, double skew) {
  if (nodes <= 0 || nnz < nodes || nnz > (std::int64_t{1} << 31) - 1) {
    throw InputError("graph shape", "need nodes >= 1 and nodes <= nnz < 2^31");
  }
  auto g = std::make_shared<Graph>();
  g->id = next_graph_id++;
  g->nodes = nodes;
  g->nnz = nnz;
  g->indptr.resize(static_cast<std::size_t>(nodes) + 1, 0);
  // Every 64th row carries `skew` times the mean, the rest share what is left evenly.
  const double mean = static_cast<double>(nnz) / static_cast<double>(nodes);
  const std::int64_t heavy_rows = skew > 1.0 ? (nodes + 63) / 64 : 0;
  const double heavy = std::min(mean * skew, static_cast<double>(nnz) / std::max<std::int64_t>(1, heavy_rows) * 0.5);
  const double light = heavy_rows ? (static_cast<double>(nnz) - heavy * heavy_rows) / static_cast<double>(nodes - heavy_rows) : mean;
  double acc = 0.0;
  for (std::int64_t r = 0; r < nodes; ++r) {
    acc += (heavy_rows && r % 64 == 0) ? heavy : light;
    g->indptr[r + 1] = static_cast<std::int32_t>(std::min<double>(std::llround(acc), static_cast<double>(nnz)));
  }
  g->indptr.back() = static_cast<std::int32_t>(nnz);
  g->degree_skew = skew_of(g->indptr);
  return g;
}

}  // namespace dype::rt
