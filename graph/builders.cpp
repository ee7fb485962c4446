#include "graph/builders.h"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

namespace dype::kernels {
namespace {

struct Entry {
  std::int64_t col;
  float weight;
  bool fill;  // an added self loop (add_missing drops it when the row has a real one)
};

template <typename Index>
void check_fits(std::int64_t value, const char* field, const char* what) {
  if (value > static_cast<std::int64_t>(std::numeric_limits<Index>::max())) {
    throw InputError(field, std::string(what) + " " + std::to_string(value) +
                                " does not fit " + std::to_string(sizeof(Index) * 8) +
                                "-bit indices; build with int64 indices");
  }
}

// Counting sort of the edges by destination row (stable, so edge order survives within a row),
// then per row, in parallel: sort by column, merge duplicates, apply the self-loop policy.
template <typename Index>
Csr<Index> build(const EdgeList& g, const CsrOptions& opt) {
  validate_edge_list(g);
  const std::int64_t nodes = g.num_nodes;
  check_fits<Index>(nodes, "num_nodes", "node count");
  const std::int64_t edges = g.num_edges();
  const bool weighted = !g.weight.empty();
  const bool drop_loops = opt.self_loops == SelfLoops::remove;
  const bool fill_loops =
      opt.self_loops == SelfLoops::add || opt.self_loops == SelfLoops::add_missing;

  std::vector<std::int64_t> start(static_cast<std::size_t>(nodes + 1), 0);
  auto each_entry = [&](auto&& emit) {  // (row, col, weight) of every edge, reversed ones too
    for (std::int64_t e = 0; e < edges; ++e) {
      const std::int64_t s = g.src[e], d = g.dst[e];
      if (s == d && drop_loops) continue;
      const float w = weighted ? g.weight[e] : 1.0f;
      emit(d, s, w);
      if (opt.symmetrize && s != d) emit(s, d, w);
    }
  };
  each_entry([&](std::int64_t row, std::int64_t, float) { ++start[row + 1]; });
  if (fill_loops) {
    for (std::int64_t r = 0; r < nodes; ++r) ++start[r + 1];
  }
  for (std::int64_t r = 0; r < nodes; ++r) start[r + 1] += start[r];
  std::vector<Entry> entries(static_cast<std::size_t>(start[nodes]));
  std::vector<std::int64_t> fillpos(start.begin(), start.end() - 1);
  each_entry([&](std::int64_t row, std::int64_t col, float w) {
    entries[fillpos[row]++] = {col, w, false};
  });
  if (fill_loops) {  // last in each row, so keep_first prefers a real loop
    for (std::int64_t r = 0; r < nodes; ++r) entries[fillpos[r]++] = {r, opt.self_loop_weight, true};
  }

  std::vector<std::int64_t> kept(static_cast<std::size_t>(nodes), 0);
  tbb::parallel_for(std::int64_t{0}, nodes, [&](std::int64_t r) {
    Entry* begin = entries.data() + start[r];
    Entry* end = entries.data() + start[r + 1];
    std::stable_sort(begin, end, [](const Entry& a, const Entry& b) { return a.col < b.col; });
    Entry* out = begin;
    for (Entry* group = begin; group != end;) {
      Entry* group_end = group;
      while (group_end != end && group_end->col == group->col) ++group_end;
      // add_missing: a row that already has a real loop ignores the added one.
      const bool has_real = std::any_of(group, group_end, [](const Entry& x) { return !x.fill; });
      Entry merged{group->col, 0.0f, false};
      bool first = true;
      for (Entry* x = group; x != group_end; ++x) {
        if (x->fill && has_real && opt.self_loops == SelfLoops::add_missing) continue;
        if (first) {
          merged.weight = x->weight;
          first = false;
        } else if (opt.duplicates == DuplicateEdges::sum) {
          merged.weight += x->weight;
        } else if (opt.duplicates == DuplicateEdges::max) {
          merged.weight = std::max(merged.weight, x->weight);
        }  // keep_first: nothing to do
      }
      *out++ = merged;
      group = group_end;
    }
    kept[r] = out - begin;
  });

  Csr<Index> a;
  a.rows = nodes;
  a.cols = nodes;
  a.indptr.resize(static_cast<std::size_t>(nodes + 1));
  a.indptr[0] = 0;
  std::int64_t nnz = 0;
  for (std::int64_t r = 0; r < nodes; ++r) {
    nnz += kept[r];
    check_fits<Index>(nnz, "edge_index", "nnz");
    a.indptr[r + 1] = static_cast<Index>(nnz);
  }
  a.indices.resize(static_cast<std::size_t>(nnz));
  a.values.resize(static_cast<std::size_t>(nnz));
  tbb::parallel_for(std::int64_t{0}, nodes, [&](std::int64_t r) {
    const Entry* in = entries.data() + start[r];
    const std::int64_t base = a.indptr[r];
    for (std::int64_t k = 0; k < kept[r]; ++k) {
      a.indices[base + k] = static_cast<Index>(in[k].col);
      a.values[base + k] = in[k].weight;
    }
  });
  return a;
}

}  // namespace

void validate_edge_list(const EdgeList& g) {
  if (g.num_nodes < 0) {
    throw InputError("num_nodes", "negative node count " + std::to_string(g.num_nodes));
  }
  if (g.src.size() != g.dst.size()) {
    throw InputError("edge_index", "row 0 (sources) has " + std::to_string(g.src.size()) +
                                       " entries but row 1 (targets) has " +
                                       std::to_string(g.dst.size()));
  }
  if (!g.weight.empty() && g.weight.size() != g.src.size()) {
    throw InputError("edge_weight", std::to_string(g.weight.size()) + " entries for " +
                                        std::to_string(g.src.size()) + " edges");
  }
  const std::int64_t n = g.num_nodes;
  for (int side = 0; side < 2; ++side) {
    const std::vector<std::int64_t>& ids = side == 0 ? g.src : g.dst;
    for (std::size_t e = 0; e < ids.size(); ++e) {
      if (ids[e] < 0 || ids[e] >= n) {
        throw InputError("edge_index[" + std::to_string(side) + "][" + std::to_string(e) + "]",
                         "node " + std::to_string(ids[e]) + " out of range [0, " +
                             std::to_string(n) + ")");
      }
    }
  }
  for (std::size_t e = 0; e < g.weight.size(); ++e) {
    if (!std::isfinite(g.weight[e])) {
      throw InputError("edge_weight[" + std::to_string(e) + "]",
                       "not finite (" + std::to_string(g.weight[e]) + ")");
    }
  }
}

template <typename Index>
Csr<Index> to_csr(const EdgeList& edges, const CsrOptions& options) {
  return build<Index>(edges, options);
}

template <typename Index>
Csr<Index> gcn_norm(const EdgeList& edges, const GcnNormOptions& options) {
  CsrOptions csr;
  csr.duplicates = options.duplicates;
  csr.self_loops = options.add_self_loops ? SelfLoops::add_missing : SelfLoops::keep;
  csr.self_loop_weight = options.fill_value;
  csr.symmetrize = options.symmetrize;
  Csr<Index> a = build<Index>(edges, csr);
  // Degrees in double: rows of a million weights would lose digits in float.
  std::vector<double> scale(static_cast<std::size_t>(a.rows));
  tbb::parallel_for(std::int64_t{0}, a.rows, [&](std::int64_t r) {
    double deg = 0.0;
    for (Index j = a.indptr[r]; j < a.indptr[r + 1]; ++j) deg += a.values[j];
    const bool symmetric = options.normalization == GcnNormalization::symmetric;
    scale[r] = deg > 0.0 ? (symmetric ? 1.0 / std::sqrt(deg) : 1.0 / deg) : 0.0;
  });
  tbb::parallel_for(std::int64_t{0}, a.rows, [&](std::int64_t r) {
    for (Index j = a.indptr[r]; j < a.indptr[r + 1]; ++j) {
      double w = scale[r] * a.values[j];
      if (options.normalization == GcnNormalization::symmetric) w *= scale[a.indices[j]];
      a.values[j] = static_cast<float>(w);
    }
  });
  return a;
}

template <typename Index>
Csr<Index> gin_adjacency(const EdgeList& edges, float eps, bool symmetrize) {
  CsrOptions csr;
  csr.duplicates = DuplicateEdges::sum;
  csr.self_loops = SelfLoops::add;
  csr.self_loop_weight = 1.0f + eps;
  csr.symmetrize = symmetrize;
  return build<Index>(edges, csr);
}

template Csr<std::int32_t> to_csr<std::int32_t>(const EdgeList&, const CsrOptions&);
template Csr<std::int64_t> to_csr<std::int64_t>(const EdgeList&, const CsrOptions&);
template Csr<std::int32_t> gcn_norm<std::int32_t>(const EdgeList&, const GcnNormOptions&);
template Csr<std::int64_t> gcn_norm<std::int64_t>(const EdgeList&, const GcnNormOptions&);
template Csr<std::int32_t> gin_adjacency<std::int32_t>(const EdgeList&, float, bool);
template Csr<std::int64_t> gin_adjacency<std::int64_t>(const EdgeList&, float, bool);

}  // namespace dype::kernels
