#include "runtime/daemon/graph_registry.h"

#include "runtime/daemon/errors.h"

#include <algorithm>
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

void GraphRegistry::check_share_locked(const GraphOwner& owner, std::size_t need) const {
  const std::string oid = owner.id();
  std::size_t owner_n = 0, owner_b = 0, addr_n = 0, addr_b = 0;
  for (const auto& [id, e] : graphs_) {
    if (e->owner == oid) ++owner_n, owner_b += e->bytes;
    if (e->address == owner.address) ++addr_n, addr_b += e->bytes;
  }
  auto check = [&](double share, std::size_t n, std::size_t b, const std::string& who, const char* flag) {
    if (share >= 1.0) return;
    const auto max_n = std::max<std::size_t>(1, static_cast<std::size_t>(share * limits_.max_graphs));
    const auto max_b = static_cast<std::size_t>(share * limits_.max_bytes);
    if (n >= max_n)
      throw InputError("graphs", who + " holds " + std::to_string(n) + " graphs, its share of the registry (" +
                                     flag + "); delete one first");
    if (b + need > max_b)
      throw InputError("graphs", who + " holds " + size_text(b) + " of its " + size_text(max_b) + " share (" + flag +
                                     ") and this graph needs " + size_text(need) + "; delete graphs first");
  };
  check(limits_.owner_share, owner_n, owner_b, owner.key.empty() ? "this client" : "this owner key", "--graph-owner-share");
  check(limits_.address_share, addr_n, addr_b, "address " + owner.address, "--graph-address-share");
}

std::string GraphRegistry::add(kernels::EdgeList edges, const GraphOwner& owner) {
  std::lock_guard lock(mu_);
  drop_idle_locked();
  if (graphs_.size() >= limits_.max_graphs)
    throw InputError("graphs", "registry full (" + std::to_string(limits_.max_graphs) + " graphs); delete one first");
  const std::size_t need = edge_bytes(edges);
  if (bytes_ + need > limits_.max_bytes) {
    throw InputError("graphs", "registry full: it holds " + size_text(bytes_) + " of " + size_text(limits_.max_bytes) +
                                   " and this graph needs " + size_text(need) + "; delete graphs first");
  }
  check_share_locked(owner, need);
  auto e = std::make_shared<GraphEntry>();
  e->owner = owner.id();
  e->address = owner.address;
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

bool GraphRegistry::remove(const std::string& id, const GraphOwner* owner) {
  std::lock_guard lock(mu_);
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return false;
  if (owner && it->second->owner != owner->id()) return false;  // as unknown: ids are not confirmed to others
  bytes_ -= it->second->bytes;
  graphs_.erase(it);
  return true;
}

std::size_t GraphRegistry::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::vector<std::string> GraphRegistry::remove_all(const GraphOwner& owner) {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  const std::string oid = owner.id();
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (it->second->owner == oid) {
      ids.push_back(it->first);
      bytes_ -= it->second->bytes;
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
  return ids;
}

GraphSummary GraphRegistry::summary_locked(const GraphEntry& e) const {
  return {e.id, e.edges.num_nodes, e.edges.num_edges(), e.bytes,
          std::chrono::duration<double>(Clock::now() - e.last_used).count(), e.address, e.owner.rfind("key ", 0) == 0};
}

std::vector<GraphSummary> GraphRegistry::list() {
  std::lock_guard lock(mu_);
  drop_idle_locked();
  std::vector<GraphSummary> out;
  for (const auto& [id, e] : graphs_) out.push_back(summary_locked(*e));
  return out;
}

std::vector<GraphSummary> GraphRegistry::list(const GraphOwner& owner) {
  std::lock_guard lock(mu_);
  drop_idle_locked();
  std::vector<GraphSummary> out;
  const std::string oid = owner.id();
  for (const auto& [id, e] : graphs_)
    if (e->owner == oid) out.push_back(summary_locked(*e));
  return out;
}

std::size_t GraphRegistry::size() const {
  std::lock_guard lock(mu_);
  return graphs_.size();
}

}  // namespace dype::rt::daemon
