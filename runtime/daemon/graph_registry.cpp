#include "runtime/daemon/graph_registry.h"

#include "runtime/daemon/errors.h"

#include <cstdio>
#include <random>

namespace dype::rt::daemon {

std::shared_ptr<const Graph> normalise_for(const kernels::EdgeList& edges, const Model& model) {
  return graph_for_model(edges, model.spec());
}

namespace {
// Which normalisation a model needs: models that share one share the normalised graph.
std::string layout_key(const Model& model) {
  switch (model.family()) {
    case ModelFamily::gcn: return "gcn";
    case ModelFamily::sage: return "sage";
    default: return "gin:" + std::to_string(model.spec().gin_eps);
  }
}
}  // namespace

namespace {
using Clock = std::chrono::steady_clock;

std::size_t edge_bytes(const kernels::EdgeList& e) {
  return (e.src.size() + e.dst.size()) * sizeof(std::int64_t) + e.weight.size() * sizeof(float);
}
std::size_t graph_bytes(const Graph& g) {
  return g.indptr.size() * sizeof(std::int32_t) + g.indices.size() * sizeof(std::int32_t) + g.values.size() * sizeof(float);
}
std::string size_text(std::size_t b) {
  return b < (1u << 20) ? std::to_string(b) + " bytes" : std::to_string((b + (1u << 20) - 1) >> 20) + " MiB";
}
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}
}  // namespace

void GraphRegistry::drop_idle_locked() {
  if (limits_.idle_ttl_s <= 0) return;
  const auto now = Clock::now();
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (std::chrono::duration<double>(now - it->second->last_used).count() > limits_.idle_ttl_s) {
      bytes_ -= it->second->bytes;
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<GraphEntry> GraphRegistry::find_locked(const std::string& id) {
  drop_idle_locked();
  auto it = graphs_.find(id);
  if (it == graphs_.end()) {
    throw NotFound("unknown graph id '" + id + "'" +
                   (limits_.idle_ttl_s > 0 ? " (graphs unused for " + seconds_text(limits_.idle_ttl_s) + " are dropped)" : ""));
  }
  it->second->last_used = Clock::now();
  return it->second;
}

std::string GraphRegistry::add(kernels::EdgeList edges) {
  std::lock_guard lock(mu_);
  drop_idle_locked();
  if (graphs_.size() >= limits_.max_graphs)
    throw InputError("graphs", "registry full (" + std::to_string(limits_.max_graphs) + " graphs); delete one first");
  const std::size_t need = edge_bytes(edges);
  if (bytes_ + need > limits_.max_bytes) {
    throw InputError("graphs", "registry full: it holds " + size_text(bytes_) + " of " + size_text(limits_.max_bytes) +
                                   " and this graph needs " + size_text(need) + "; delete graphs first");
  }
  auto e = std::make_shared<GraphEntry>();
  // 128 random bits: a sequential id let any client guess and delete another's graph, and ids
  // restarted at g1 after a restart so a held id answered with another graph.
  do {
    char hex[33];
    std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", rng_(), rng_(), rng_(), rng_());
    e->id = "g" + std::string(hex);
  } while (graphs_.count(e->id) != 0);
  e->edges = std::move(edges);
  e->bytes = need;
  e->last_used = Clock::now();
  bytes_ += need;
  graphs_[e->id] = e;
  return e->id;
}

std::int64_t GraphRegistry::num_nodes(const std::string& id) {
  std::lock_guard lock(mu_);
  return find_locked(id)->edges.num_nodes;
}

std::shared_ptr<const Graph> GraphRegistry::graph_for(const std::string& id, const Model& model) {
  std::shared_ptr<GraphEntry> e;
  {
    std::lock_guard lock(mu_);
    e = find_locked(id);
    const std::string key = layout_key(model);
    if (auto n = e->normalised.find(key); n != e->normalised.end()) return n->second;
  }
  // Normalise outside the lock (large graphs); a concurrent first use may build it twice, the
  // first stored copy wins so every request shares one Graph id.
  auto g = normalise_for(e->edges, model);
  std::lock_guard lock(mu_);
  const std::string key = layout_key(model);
  auto [it, inserted] = e->normalised.emplace(key, g);
  // Counted while the entry is registered (a concurrent remove has already taken its bytes off).
  if (inserted && graphs_.count(id) && graphs_.at(id) == e) {
    e->bytes += graph_bytes(*g);
    bytes_ += graph_bytes(*g);
  }
  return it->second;
}

bool GraphRegistry::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return false;
  bytes_ -= it->second->bytes;
  graphs_.erase(it);
  return true;
}

std::size_t GraphRegistry::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::vector<GraphSummary> GraphRegistry::list() {
  std::lock_guard lock(mu_);
  drop_idle_locked();
  std::vector<GraphSummary> out;
  const auto now = Clock::now();
  for (const auto& [id, e] : graphs_) {
    out.push_back({id, e->edges.num_nodes, e->edges.num_edges(), e->bytes,
                   std::chrono::duration<double>(now - e->last_used).count()});
  }
  return out;
}

std::size_t GraphRegistry::size() const {
  std::lock_guard lock(mu_);
  return graphs_.size();
}

}  // namespace dype::rt::daemon
