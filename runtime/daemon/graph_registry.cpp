#include "runtime/daemon/graph_registry.h"

#include "runtime/daemon/errors.h"

#include <cstdio>
#include <random>

namespace dype::rt::daemon {

std::shared_ptr<const Graph> normalise_for(const kernels::EdgeList& edges, const Model& model) {
  if (model.family() == ModelFamily::gcn) return Graph::from_edges(edges, true);
  return Graph::from_edges(edges, false, model.spec().gin_eps);
}

std::string GraphRegistry::add(kernels::EdgeList edges) {
  std::lock_guard lock(mu_);
  if (graphs_.size() >= max_graphs_)
    throw InputError("graphs", "registry full (" + std::to_string(max_graphs_) + " graphs); delete one first");
  auto e = std::make_shared<GraphEntry>();
  // 128 random bits: a sequential id let any client guess and delete another's graph, and ids
  // restarted at g1 after a restart so a held id answered with another graph.
  do {
    char hex[33];
    std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", rng_(), rng_(), rng_(), rng_());
    e->id = "g" + std::string(hex);
  } while (graphs_.count(e->id) != 0);
  e->edges = std::move(edges);
  graphs_[e->id] = e;
  return e->id;
}

std::int64_t GraphRegistry::num_nodes(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = graphs_.find(id);
  if (it == graphs_.end()) throw NotFound("unknown graph id '" + id + "'");
  return it->second->edges.num_nodes;
}

std::shared_ptr<const Graph> GraphRegistry::graph_for(const std::string& id, const Model& model) {
  std::shared_ptr<GraphEntry> e;
  {
    std::lock_guard lock(mu_);
    auto it = graphs_.find(id);
    if (it == graphs_.end()) throw NotFound("unknown graph id '" + id + "'");
    e = it->second;
    const std::string key = model.family() == ModelFamily::gcn ? "gcn" : "gin:" + std::to_string(model.spec().gin_eps);
    if (auto n = e->normalised.find(key); n != e->normalised.end()) return n->second;
  }
  // Normalise outside the lock (large graphs); a concurrent first use may build it twice, the
  // first stored copy wins so every request shares one Graph id.
  auto g = normalise_for(e->edges, model);
  std::lock_guard lock(mu_);
  const std::string key = model.family() == ModelFamily::gcn ? "gcn" : "gin:" + std::to_string(model.spec().gin_eps);
  return e->normalised.emplace(key, g).first->second;
}

bool GraphRegistry::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  return graphs_.erase(id) > 0;
}

std::size_t GraphRegistry::size() const {
  std::lock_guard lock(mu_);
  return graphs_.size();
}

}  // namespace dype::rt::daemon
