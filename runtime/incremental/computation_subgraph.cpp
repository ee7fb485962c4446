#include "runtime/incremental/computation_subgraph.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

#include "common/error.h"
#include "graph/characteristics.h"
#include "graph/gather_locality.h"
#include "runtime/incremental/node_set.h"

namespace dype::rt {

ComputationSubgraph computation_subgraph(const Graph& g, std::span<const std::int64_t> node_ids,
                                         int layers) {
  if (g.size_only())
    throw InputError("graph", "is shape-only: it has no entries to take a subgraph of");
  if (layers < 1) throw InputError("layers", "must be >= 1");
  const std::int64_t n = g.nodes;
  const std::int64_t rpn = g.rows_per_node;
  // hop[u]: the fewest layers between u and an answered node (absent: not reached within
  // `layers`). Maps, not arrays of n: an answer costs the rows it reaches, however large the graph.
  std::unordered_map<std::int64_t, std::int32_t> hop;
  std::vector<std::int64_t> frontier, next, reached;
  for (const std::int64_t u : node_ids) {
    if (u < 0 || u >= n)
      throw InputError(
          "node_ids", "node " + std::to_string(u) + " out of range [0, " + std::to_string(n) + ")");
    if (hop.emplace(u, 0).second) {
      frontier.push_back(u);
      reached.push_back(u);
    }
  }
  // Outputs at the last layer need the layer before at every column of their rows, and so on down:
  // the nodes at hop < layers are the ones whose rows are read.
  for (int h = 1; h <= layers && !frontier.empty(); ++h) {
    next.clear();
    for (const std::int64_t u : frontier)
      for (std::int64_t r = u * rpn; r < (u + 1) * rpn; ++r)
        for (std::int32_t i = g.indptr[r]; i < g.indptr[r + 1]; ++i) {
          const std::int32_t j = g.indices[i];
          if (hop.emplace(j, h).second) {
            next.push_back(j);
            reached.push_back(j);
          }
        }
    frontier.swap(next);
  }
  ComputationSubgraph s;
  if (static_cast<std::int64_t>(reached.size()) == n) return s;  // all of it: no copy to make
  std::sort(reached.begin(), reached.end());
  s.nodes = reached;
  std::unordered_map<std::int64_t, std::int32_t> local;
  local.reserve(reached.size());
  for (std::size_t i = 0; i < reached.size(); ++i)
    local.emplace(reached[i], static_cast<std::int32_t>(i));

  auto sub = std::make_shared<Graph>();
  sub->id = Graph::fresh_id();
  sub->nodes = static_cast<std::int64_t>(reached.size());
  sub->rows_per_node = g.rows_per_node;
  sub->indptr.reserve(static_cast<std::size_t>(sub->nodes * rpn) + 1);
  sub->indptr.push_back(0);
  for (const std::int64_t u : reached) {
    const bool read = hop.at(u) < layers;  // its output is read by a layer (else only its input is)
    for (std::int64_t r = u * rpn; r < (u + 1) * rpn; ++r) {
      if (read)
        for (std::int32_t i = g.indptr[r]; i < g.indptr[r + 1]; ++i) {
          sub->indices.push_back(local.at(g.indices[i]));
          if (!g.values.empty()) sub->values.push_back(g.values[i]);
        }
      if (sub->indices.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        throw InputError("graph", "subgraph has 2^31 entries or more");
      sub->indptr.push_back(static_cast<std::int32_t>(sub->indices.size()));
    }
  }
  sub->nnz = static_cast<std::int64_t>(sub->indices.size());
  sub->degree_skew = sub->nnz == 0 ? 1.0 : kernels::degree_skew(sub->indptr);
  sub->locality = kernels::gather_locality(sub->indices, sub->nodes);
  s.graph = std::move(sub);
  s.rows_wanted.reserve(node_ids.size());
  for (const std::int64_t u : node_ids) s.rows_wanted.push_back(local.at(u));
  return s;
}

SubgraphSize computation_subgraph_size(const DynamicGraph& g, std::span<const std::int32_t> rows,
                                       int layers) {
  SubgraphSize size;
  NodeSet seen(g.nodes());
  std::vector<std::int32_t> frontier, next;
  for (const std::int32_t u : rows)
    if (seen.insert(u)) frontier.push_back(u);
  size.nodes = static_cast<std::int64_t>(frontier.size());
  for (int h = 1; h <= layers && !frontier.empty(); ++h) {
    next.clear();
    for (const std::int32_t u : frontier) {
      size.nnz +=
          static_cast<std::int64_t>(g.in(u).size()) + 1;  // read at a layer: its row is copied
      for (const auto& [j, c] : g.in(u))
        if (seen.insert(j)) next.push_back(j);
    }
    size.nodes += static_cast<std::int64_t>(next.size());
    frontier.swap(next);
  }
  return size;
}

}  // namespace dype::rt
