#include "runtime/incremental/incremental_gnn.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <tbb/parallel_for.h>

#include "common/error.h"
#include "kernels/cpu/gemm.h"
#include "runtime/incremental/node_set.h"

namespace dype::rt {

using kernels::Epilogue;

namespace {
// The epilogue of a GEMM, on a row already summed: + bias, then ReLU or GELU (erf, as the GEMM's).
void finish_row(float* row, std::int64_t n, std::span<const float> b, Epilogue e) {
  if (kernels::has_bias(e))
    for (std::int64_t c = 0; c < n; ++c) row[c] += b[c];
  if (kernels::has_relu(e))
    for (std::int64_t c = 0; c < n; ++c) row[c] = std::max(row[c], 0.0f);
  if (kernels::has_gelu(e))
    for (std::int64_t c = 0; c < n; ++c)
      row[c] = 0.5f * row[c] * (1.0f + std::erf(row[c] * 0.70710678118654752f));
}

std::span<const float> weight(const Model& m, int i) {
  return m.weight(i).data;
}

// A bulk update past this share of the nodes costs about a whole forward: run that instead.
constexpr std::int64_t kRebuildShare = 8;

// What recomputing every layer of an n-node graph with `edges` edges does (a bulk update).
IncrementalStats whole_stats(std::size_t layers, std::int64_t n, std::int64_t edges) {
  IncrementalStats st;
  st.rebuilt = true;
  st.projected.assign(layers, n);
  st.rows.assign(layers, n);
  st.nnz.assign(layers, edges + n);
  st.changed.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) st.changed[i] = static_cast<std::int32_t>(i);
  return st;
}

// Rows whose scale changed (GCN: d; SAGE: the in-degree), ascending; none under GIN.
std::vector<std::int32_t> rescaled_rows(const Model& m, const GraphChange& change) {
  const bool gcn = m.family() == ModelFamily::gcn;
  std::vector<std::int32_t> scaled;
  if (m.family() != ModelFamily::gin)
    for (const auto& e : change.edges)
      if (!(gcn && e.src == e.dst)) scaled.push_back(e.dst);
  std::sort(scaled.begin(), scaled.end());
  scaled.erase(std::unique(scaled.begin(), scaled.end()), scaled.end());
  return scaled;
}

// Columns whose Z changed: new inputs, and under GCN the rescaled rows too.
std::vector<std::int32_t> changed_columns(bool gcn, const std::vector<std::int32_t>& d_rows,
                                          const std::vector<std::int32_t>& scaled) {
  if (!gcn) return d_rows;
  std::vector<std::int32_t> columns;
  std::set_union(d_rows.begin(), d_rows.end(), scaled.begin(), scaled.end(),
                 std::back_inserter(columns));
  return columns;
}
}  // namespace

IncrementalGnn::IncrementalGnn(std::shared_ptr<const Model> model, const DynamicGraph& g)
    : model_(std::move(model)) {
  const Model& m = *model_;
  if (!m.is_gnn())
    throw InputError("model",
                     "incremental inference is for GCN, GIN and GraphSAGE, not a transformer");
  if (g.feature_len() != m.spec().in_features)
    throw InputError("x", "the graph's stored features are " + std::to_string(g.feature_len()) +
                              " wide, the model takes " + std::to_string(m.spec().in_features));
  const int per = m.family() == ModelFamily::gin ? 3 : 2;
  for (int l = 0; l < m.spec().layers; ++l) {
    const Step& agg = m.step(per * l);
    const Step& up = m.step(per * l + 1);
    Layer L;
    L.in = agg.in_cols;
    L.width = up.out_cols;
    L.out = up.out_cols;
    L.act = up.epilogue;
    const auto w = weight(m, up.weights[0]);
    L.b = weight(m, up.weights[1]);
    if (m.family() == ModelFamily::sage) {  // [W_l ; W_r]: the mean's half, then the node's own
      const auto half = static_cast<std::size_t>(L.in * L.width);
      L.wa = w.subspan(0, half);
      L.wr = w.subspan(half, half);
    } else {
      L.wa = w;
    }
    if (m.family() == ModelFamily::gin) {
      const Step& mlp2 = m.step(per * l + 2);
      L.w2 = weight(m, mlp2.weights[0]);
      L.b2 = weight(m, mlp2.weights[1]);
      L.act2 = mlp2.epilogue;
      L.out = mlp2.out_cols;
    }
    layers_.push_back(std::move(L));
  }
  const std::int64_t n = g.nodes();
  resize(n);
  std::vector<std::int32_t> all(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) all[i] = static_cast<std::int32_t>(i);
  std::vector<float> h(g.features().data), y;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    project(L, h, n, L.p, L.q);
    for (std::int64_t j = 0; j < n; ++j) L.zscale[j] = column_scale(g, j);
    tbb::parallel_for(std::int64_t{0}, n, [&](std::int64_t u) { sum_row(g, L, u); });
    finish(g, L, all, y);
    h.swap(y);
  }
  out_.data = std::move(h);
}

void IncrementalGnn::resize(std::int64_t n) {
  const auto un = static_cast<std::size_t>(n);
  for (Layer& L : layers_) {
    const auto w = static_cast<std::size_t>(L.width);
    L.p.resize(un * w, 0.0f);
    L.raw.resize(un * w, 0.0f);
    if (!L.wr.empty()) L.q.resize(un * w, 0.0f);
    L.zscale.resize(un, 0.0f);
    L.deltas.resize(un, 0);
  }
  out_.rows = n;
  out_.cols = layers_.back().out;
  out_.data.resize(un * static_cast<std::size_t>(out_.cols), 0.0f);
  mark_.resize(un, 0);
}

float IncrementalGnn::self_weight() const {
  switch (model_->family()) {
    case ModelFamily::gcn:
      return 1.0f;
    case ModelFamily::gin:
      return 1.0f + model_->spec().gin_eps;
    default:
      return 0.0f;
  }
}

float IncrementalGnn::row_scale(const DynamicGraph& g, std::int64_t u) const {
  if (model_->family() == ModelFamily::gcn) return column_scale(g, u);
  if (model_->family() == ModelFamily::sage)
    return g.in_degree(u) > 0 ? 1.0f / static_cast<float>(g.in_degree(u)) : 0.0f;
  return 1.0f;
}

float IncrementalGnn::column_scale(const DynamicGraph& g, std::int64_t j) const {
  if (model_->family() != ModelFamily::gcn) return 1.0f;
  // PyG's gcn_norm: a node's loops become one self loop of weight 1, d = 1 + its other in-edges.
  const double d = 1.0 + static_cast<double>(g.in_degree(j) - g.loops(j));
  return static_cast<float>(1.0 / std::sqrt(d));
}

std::int64_t IncrementalGnn::sum_row(const DynamicGraph& g, Layer& L, std::int64_t u) const {
  const std::int64_t w = L.width;
  float* r = L.raw.data() + u * w;
  std::fill(r, r + w, 0.0f);
  const bool gcn = model_->family() == ModelFamily::gcn;
  for (const auto& [j, c] : g.in(u)) {
    if (gcn && j == u) continue;  // replaced by the self loop below
    const float k = static_cast<float>(c) * L.zscale[j];
    const float* p = L.p.data() + static_cast<std::int64_t>(j) * w;
    for (std::int64_t i = 0; i < w; ++i) r[i] += k * p[i];
  }
  const float self = self_weight() * L.zscale[u];
  if (self != 0.0f) {
    const float* p = L.p.data() + u * w;
    for (std::int64_t i = 0; i < w; ++i) r[i] += self * p[i];
  }
  L.deltas[u] = 0;
  return static_cast<std::int64_t>(g.in(u).size()) + 1;
}

void IncrementalGnn::project(const Layer& L, std::span<const float> h, std::int64_t count,
                             std::vector<float>& p, std::vector<float>& q) const {
  const auto size = static_cast<std::size_t>(count * L.width);
  p.resize(size);
  if (count == 0) return;
  kernels::cpu::gemm(h, L.wa, {}, p, {count, L.in, L.width}, Epilogue::none);
  if (!L.wr.empty()) {
    q.resize(size);
    kernels::cpu::gemm(h, L.wr, {}, q, {count, L.in, L.width}, Epilogue::none);
  }
}

void IncrementalGnn::finish(const DynamicGraph& g, const Layer& L,
                            std::span<const std::int32_t> rows, std::vector<float>& y) const {
  const auto k = static_cast<std::int64_t>(rows.size());
  const std::int64_t w = L.width;
  std::vector<float> a(static_cast<std::size_t>(k * w));
  tbb::parallel_for(std::int64_t{0}, k, [&](std::int64_t i) {
    const std::int64_t u = rows[i];
    const float s = row_scale(g, u);
    float* t = a.data() + i * w;
    const float* r = L.raw.data() + u * w;
    for (std::int64_t c = 0; c < w; ++c) t[c] = s * r[c];
    if (!L.q.empty())
      for (std::int64_t c = 0; c < w; ++c) t[c] += L.q[u * w + c];
    finish_row(t, w, L.b, L.act);
  });
  if (L.w2.empty()) {
    y.swap(a);
    return;
  }
  y.resize(static_cast<std::size_t>(k * L.out));
  if (k > 0) kernels::cpu::gemm(a, L.w2, L.b2, y, {k, w, L.out}, L.act2);
}

IncrementalStats IncrementalGnn::update(const DynamicGraph& g, const GraphChange& change) {
  IncrementalStats st;
  const std::int64_t n = change.new_nodes;
  resize(n);
  const Model& m = *model_;
  const bool gcn = m.family() == ModelFamily::gcn;
  if (rebuilds(change)) {
    *this = IncrementalGnn(model_, g);
    return whole_stats(layers_.size(), n, g.num_edges());
  }
  // Rows whose scale changed (GCN: d; SAGE: the in-degree); under GCN also the columns' Z.
  const std::vector<std::int32_t> scaled = rescaled_rows(m, change);

  std::vector<std::int32_t> d_rows = change.feature_rows;  // rows whose h changed, ascending
  const std::int64_t f = g.feature_len();
  std::vector<float> h(d_rows.size() * static_cast<std::size_t>(f));
  for (std::size_t i = 0; i < d_rows.size(); ++i)
    std::copy_n(g.features().data.begin() + static_cast<std::ptrdiff_t>(d_rows[i] * f), f,
                h.begin() + static_cast<std::ptrdiff_t>(i * f));
  const float self = self_weight();
  std::vector<float> p_new, q_new, dz, y;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    const std::int64_t w = L.width;
    project(L, h, static_cast<std::int64_t>(d_rows.size()), p_new, q_new);
    st.projected.push_back(static_cast<std::int64_t>(d_rows.size()));
    if (++stamp_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      stamp_ = 1;
    }
    std::vector<std::int32_t> touched;
    auto touch = [&](std::int32_t u) {
      if (mark_[u] != stamp_) {
        mark_[u] = stamp_;
        touched.push_back(u);
      }
    };
    auto add_to = [&](std::int32_t u, float k, const float* z) {
      float* r = L.raw.data() + static_cast<std::int64_t>(u) * w;
      for (std::int64_t i = 0; i < w; ++i) r[i] += k * z[i];
      if (L.deltas[u] < kRefreshAfter) ++L.deltas[u];
      touch(u);
    };
    std::int64_t nnz = 0;
    // Edges added or removed: their source's Z before this update, in or out of the target's sum.
    for (const auto& e : change.edges) {
      if (gcn && e.src == e.dst) continue;
      add_to(e.dst, static_cast<float>(e.delta) * L.zscale[e.src],
             L.p.data() + static_cast<std::int64_t>(e.src) * w);
      ++nnz;
    }
    // Columns whose Z changed: the difference, to each out-neighbour and to the node's own row.
    // Under GCN a degree change rescales a column's Z too; otherwise only new inputs change it.
    const std::vector<std::int32_t> columns = changed_columns(gcn, d_rows, scaled);
    dz.resize(static_cast<std::size_t>(w));
    std::size_t di = 0;
    for (const std::int32_t j : columns) {
      while (di < d_rows.size() && d_rows[di] < j) ++di;
      const bool fresh = di < d_rows.size() && d_rows[di] == j;
      float* p = L.p.data() + static_cast<std::int64_t>(j) * w;
      const float* pn = fresh ? p_new.data() + di * w : p;
      const float zs_new = column_scale(g, j), zs_old = L.zscale[j];
      for (std::int64_t i = 0; i < w; ++i) dz[i] = pn[i] * zs_new - p[i] * zs_old;
      for (const auto& [u, c] : g.out(j))
        if (!(gcn && u == j)) add_to(u, static_cast<float>(c), dz.data());
      if (self != 0.0f) add_to(j, self, dz.data());
      nnz += static_cast<std::int64_t>(g.out(j).size());
      if (fresh) {
        std::copy_n(pn, w, p);
        if (!L.q.empty())
          std::copy_n(q_new.data() + di * w, w, L.q.data() + static_cast<std::int64_t>(j) * w);
      }
      L.zscale[j] = zs_new;
    }
    for (const std::int32_t u : scaled) touch(u);
    for (const std::int32_t u : d_rows)
      if (!L.q.empty()) touch(u);  // SAGE: the node's own term changed
    std::sort(touched.begin(), touched.end());
    for (const std::int32_t u : touched)
      if (L.deltas[u] >= kRefreshAfter) {
        nnz += sum_row(g, L, u);
        ++st.refreshed;
      }
    finish(g, L, touched, y);
    st.rows.push_back(static_cast<std::int64_t>(touched.size()));
    st.nnz.push_back(nnz);
    if (l + 1 == layers_.size()) {
      const std::int64_t o = out_.cols;
      for (std::size_t i = 0; i < touched.size(); ++i)
        std::copy_n(y.data() + i * o, o,
                    out_.data.data() + static_cast<std::int64_t>(touched[i]) * o);
      st.changed = std::move(touched);
    } else {
      h.swap(y);
      d_rows = std::move(touched);
    }
  }
  return st;
}

bool IncrementalGnn::rebuilds(const GraphChange& change) {
  return static_cast<std::int64_t>(change.edges.size() + change.feature_rows.size()) *
             kRebuildShare >
         change.new_nodes;
}

IncrementalStats IncrementalGnn::reach(const Model& m, const DynamicGraph& g,
                                       const GraphChange& change) {
  IncrementalStats st;
  const auto layers = static_cast<std::size_t>(m.spec().layers);
  const std::int64_t n = change.new_nodes;
  if (rebuilds(change)) return whole_stats(layers, n, g.num_edges());
  // The sets update() walks, layer by layer (see there for why each row is in them).
  const bool gcn = m.family() == ModelFamily::gcn, sage = m.family() == ModelFamily::sage;
  const bool own = gcn || (m.family() == ModelFamily::gin &&
                           1.0f + m.spec().gin_eps != 0.0f);  // self_weight() != 0
  const std::vector<std::int32_t> scaled = rescaled_rows(m, change);
  std::vector<std::int32_t> d_rows = change.feature_rows;
  NodeSet mark(n);
  for (std::size_t l = 0; l < layers; ++l) {
    st.projected.push_back(static_cast<std::int64_t>(d_rows.size()));
    std::vector<std::int32_t> touched;
    auto touch = [&](std::int32_t u) {
      if (mark.insert(u)) touched.push_back(u);
    };
    std::int64_t nnz = 0;
    for (const auto& e : change.edges) {
      if (gcn && e.src == e.dst) continue;
      touch(e.dst);
      ++nnz;
    }
    for (const std::int32_t j : changed_columns(gcn, d_rows, scaled)) {
      for (const auto& [u, c] : g.out(j))
        if (!(gcn && u == j)) touch(u);
      if (own) touch(j);  // the node's own term (GCN's self loop, GIN's 1 + eps unless 0)
      nnz += static_cast<std::int64_t>(g.out(j).size());
    }
    for (const std::int32_t u : scaled) touch(u);
    if (sage)
      for (const std::int32_t u : d_rows) touch(u);
    mark.clear(touched);
    std::sort(touched.begin(), touched.end());
    st.rows.push_back(static_cast<std::int64_t>(touched.size()));
    st.nnz.push_back(nnz);
    if (l + 1 == layers)
      st.changed = std::move(touched);
    else
      d_rows = std::move(touched);
  }
  return st;
}

HostTensor IncrementalGnn::rows(std::span<const std::int64_t> ids) const {
  return take_rows(out_, ids);
}

std::size_t IncrementalGnn::bytes() const {
  std::size_t b = out_.data.size() * sizeof(float) + mark_.size() * sizeof(std::uint32_t);
  for (const Layer& L : layers_)
    b += (L.p.size() + L.raw.size() + L.q.size() + L.zscale.size()) * sizeof(float) +
         L.deltas.size() * sizeof(std::uint16_t);
  return b;
}

std::size_t IncrementalGnn::bytes_for(const Model& model, std::int64_t nodes) {
  if (!model.is_gnn()) return 0;
  const int per = model.family() == ModelFamily::gin ? 3 : 2;
  const auto n = static_cast<std::size_t>(nodes);
  std::size_t b =
      n * (static_cast<std::size_t>(model.output_cols()) * sizeof(float) + sizeof(std::uint32_t));
  for (int l = 0; l < model.spec().layers; ++l) {
    const auto w = static_cast<std::size_t>(model.step(per * l + 1).out_cols);
    const std::size_t mats = model.family() == ModelFamily::sage ? 3 : 2;
    b += n * (mats * w * sizeof(float) + sizeof(float) + sizeof(std::uint16_t));
  }
  return b;
}

}  // namespace dype::rt
