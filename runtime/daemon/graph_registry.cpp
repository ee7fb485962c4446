#include "runtime/daemon/graph_registry.h"

#include "runtime/daemon/errors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <random>
#include <sstream>

namespace dype::rt::daemon {

std::shared_ptr<const Graph> normalise_for(const kernels::EdgeList& edges, const Model& model) {
  return graph_for_model(edges, model.spec());
}

namespace {
// Which normalisation a model needs: models that share one share the normalised graph.
std::string layout_key(const Model& model) {
  switch (model.family()) {
    case ModelFamily::gcn:
      return "gcn";
    case ModelFamily::sage:
      return "sage";
    default:
      return "gin:" + std::to_string(model.spec().gin_eps);
  }
}
}  // namespace

namespace {
using Clock = std::chrono::steady_clock;

std::size_t edge_bytes(const kernels::EdgeList& e) {
  return (e.src.size() + e.dst.size()) * sizeof(std::int64_t) + e.weight.size() * sizeof(float);
}
std::size_t graph_bytes(const Graph& g) {
  return g.indptr.size() * sizeof(std::int32_t) + g.indices.size() * sizeof(std::int32_t) +
         g.values.size() * sizeof(float);
}
std::string size_text(std::size_t b) {
  return b < (1u << 20) ? std::to_string(b) + " bytes"
                        : std::to_string((b + (1u << 20) - 1) >> 20) + " MiB";
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
      forget_locked(*it->second);
      ++expired_;
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
    ++misses_;
    throw NotFound("unknown graph id '" + id + "'" +
                   (limits_.idle_ttl_s > 0 ? " (graphs unused for " +
                                                 seconds_text(limits_.idle_ttl_s) + " are dropped)"
                                           : ""));
  }
  it->second->last_used = Clock::now();
  return it->second;
}

void GraphRegistry::check_share_locked(const GraphOwner& owner, std::size_t need,
                                       const std::string& what, bool new_graph) const {
  const std::string oid = owner.id();
  std::size_t owner_n = 0, owner_b = 0, addr_n = 0, addr_b = 0;
  for (const auto& [id, e] : graphs_) {
    if (e->owner == oid) ++owner_n, owner_b += e->bytes;
    if (e->address == owner.address) ++addr_n, addr_b += e->bytes;
  }
  auto check = [&](double share, std::size_t n, std::size_t b, const std::string& who,
                   const char* flag) {
    if (share >= 1.0) return;
    const auto max_n =
        std::max<std::size_t>(1, static_cast<std::size_t>(share * limits_.max_graphs));
    const auto max_b = static_cast<std::size_t>(share * limits_.max_bytes);
    if (new_graph && n >= max_n)
      throw InputError("graphs", who + " holds " + std::to_string(n) +
                                     " graphs, its share of the registry (" + flag +
                                     "); delete one first");
    if (b + need > max_b)
      throw InputError("graphs", who + " holds " + size_text(b) + " of its " + size_text(max_b) +
                                     " share (" + flag + ") and " + what + " needs " +
                                     size_text(need) + "; delete graphs first");
  };
  check(limits_.owner_share, owner_n, owner_b, owner.key.empty() ? "this client" : "this owner key",
        "--graph-owner-share");
  check(limits_.address_share, addr_n, addr_b, "address " + owner.address, "--graph-address-share");
}

void GraphRegistry::check_growth_locked(const GraphOwner& holder, std::size_t need,
                                        const std::string& what) const {
  if (bytes_ + need > limits_.max_bytes)
    throw InputError("graphs", "registry full: it holds " + size_text(bytes_) + " of " +
                                   size_text(limits_.max_bytes) + " and " + what + " needs " +
                                   size_text(need) + "; delete graphs first");
  check_share_locked(holder, need, what, /*new_graph=*/false);
}

bool GraphRegistry::registered_locked(const GraphEntry& e) const {
  const auto it = graphs_.find(e.id);
  return it != graphs_.end() && it->second.get() == &e;
}

std::string GraphRegistry::add(kernels::EdgeList edges, const GraphOwner& owner, HostTensor x) {
  // Features make a graph that takes updates: its edges are kept as adjacency lists (checked and
  // built before the lock; the features' width and values are checked there too).
  std::unique_ptr<DynamicGraph> dynamic;
  if (x.cols > 0) {
    if (!edges.weight.empty())
      throw InputError("input 'edge_weight'",
                       "a graph registered with its features x takes updates, which carry no "
                       "edge weights: register it without edge_weight");
    dynamic = std::make_unique<DynamicGraph>(edges, std::move(x));
  }
  // The entry's lock before the registry's, the order every path takes them in: held until its
  // snapshot is written (below), so an owner who lists it meanwhile waits to update it.
  auto e = std::make_shared<GraphEntry>();
  std::unique_lock entry(e->mu, std::defer_lock);
  if (store_ && dynamic) entry.lock();
  std::unique_lock lock(mu_);
  drop_idle_locked();
  const std::size_t need = dynamic ? dynamic->bytes() : edge_bytes(edges);
  try {
    if (graphs_.size() >= limits_.max_graphs)
      throw InputError("graphs", "registry full (" + std::to_string(limits_.max_graphs) +
                                     " graphs); delete one first");
    if (bytes_ + need > limits_.max_bytes) {
      throw InputError("graphs", "registry full: it holds " + size_text(bytes_) + " of " +
                                     size_text(limits_.max_bytes) + " and this graph needs " +
                                     size_text(need) + "; delete graphs first");
    }
    check_share_locked(owner, need, "this graph", /*new_graph=*/true);
  } catch (const InputError&) {
    ++refused_;
    throw;
  }
  e->owner = owner.id();
  e->address = owner.address;
  // 128 random bits: a sequential id let any client guess and delete another's graph, and ids
  // restarted at g1 after a restart so a held id answered with another graph.
  do {
    char hex[33];
    std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", rng_(), rng_(), rng_(), rng_());
    e->id = "g" + std::string(hex);
  } while (graphs_.count(e->id) != 0);
  e->nodes = edges.num_nodes;
  e->edges_count = edges.num_edges();
  e->feature_len = dynamic ? dynamic->feature_len() : 0;
  if (dynamic)
    e->dynamic = std::move(dynamic);
  else
    e->edges = std::move(edges);
  e->bytes = need;
  e->last_used = Clock::now();
  bytes_ += need;
  graphs_[e->id] = e;
  if (store_ && e->dynamic) {
    // Kept before the id is answered: a restart finds every graph a client was told of. Written
    // under the entry's own lock only, not the registry's: a snapshot of tens of MB and its fsync
    // must not stall every other graph's requests.
    const std::shared_ptr<GraphStore> store = store_;
    lock.unlock();
    try {
      store->save(e->id, e->owner, e->address, *e->dynamic);
    } catch (...) {
      lock.lock();
      if (registered_locked(*e)) {
        forget_locked(*e);
        graphs_.erase(e->id);
      }
      throw;
    }
    lock.lock();
    // Deleted while it was written (its folder removed, then written again): leave nothing behind.
    if (!registered_locked(*e)) store_->remove(e->id);
  }
  ++accepted_;
  return e->id;
}

std::vector<std::string> GraphRegistry::persist(std::shared_ptr<GraphStore> store) {
  std::vector<std::string> log;
  std::vector<GraphStore::Loaded> loaded = store->load(log);
  std::lock_guard lock(mu_);
  store_ = std::move(store);
  for (GraphStore::Loaded& l : loaded) {
    auto e = std::make_shared<GraphEntry>();
    e->id = l.id;
    e->owner = l.owner;
    e->address = l.address;
    e->nodes = l.graph->nodes();
    e->edges_count = l.graph->num_edges();
    e->feature_len = l.graph->feature_len();
    e->version = l.graph->version();
    e->bytes = l.graph->bytes();
    e->last_used = Clock::now();
    e->dynamic = std::move(l.graph);
    bytes_ += e->bytes;
    log.push_back("graph " + e->id + " restored at version " + std::to_string(e->version) + ": " +
                  std::to_string(e->nodes) + " nodes, " + std::to_string(e->edges_count) +
                  " edges, " + std::to_string(e->feature_len) + " features");
    graphs_[e->id] = std::move(e);
  }
  return log;
}

std::int64_t GraphRegistry::num_nodes(const std::string& id) {
  std::lock_guard lock(mu_);
  return find_locked(id)->nodes;
}

std::shared_ptr<GraphEntry> GraphRegistry::find(const std::string& id) {
  std::lock_guard lock(mu_);
  return find_locked(id);
}

void GraphRegistry::forget_locked(const GraphEntry& e) {
  bytes_ -= e.bytes;
  activation_bytes_ -= e.activation_bytes;
  if (store_) store_->remove(e.id);
}

void GraphRegistry::account(GraphEntry& e) {
  std::size_t bytes = e.dynamic ? e.dynamic->bytes() : edge_bytes(e.edges);
  for (const auto& [key, g] : e.normalised) bytes += graph_bytes(*g);
  std::size_t kept = 0;
  for (const auto& [name, k] : e.activations) kept += k.gnn ? k.gnn->bytes() : 0;
  std::lock_guard lock(mu_);
  // Counted while the entry is registered (a concurrent remove has already taken its bytes off).
  if (registered_locked(e)) {
    bytes_ += bytes - e.bytes;
    activation_bytes_ += kept - e.activation_bytes;
  }
  e.bytes = bytes;
  e.activation_bytes = kept;
  if (e.dynamic) {
    e.nodes = e.dynamic->nodes();
    e.edges_count = e.dynamic->num_edges();
    e.version = e.dynamic->version();
  }
}

std::shared_ptr<const Graph> GraphRegistry::normalised(GraphEntry& e, const Model& model) {
  const std::string key = layout_key(model);
  if (auto n = e.normalised.find(key); n != e.normalised.end()) return n->second;
  auto g = e.dynamic ? normalise_for(e.dynamic->edge_list(), model) : normalise_for(e.edges, model);
  e.normalised.emplace(key, g);
  account(e);
  return g;
}

void GraphRegistry::check_version(const GraphEntry& e, std::optional<std::uint64_t> version) const {
  const std::uint64_t now = e.dynamic ? e.dynamic->version() : 0;
  if (!version || *version == now) return;
  throw InputError("parameters.graph_version",
                   "version " + std::to_string(*version) + " of graph '" + e.id + "' " +
                       (*version < now ? "is gone" : "does not exist yet") +
                       ": the server keeps only its current version, " + std::to_string(now));
}

std::shared_ptr<const Graph> GraphRegistry::graph_for(const std::string& id, const Model& model,
                                                      std::optional<std::uint64_t> version) {
  const std::shared_ptr<GraphEntry> e = find(id);
  std::lock_guard lock(e->mu);
  check_version(*e, version);
  ++hits_;  // a miss is counted by find_locked; num_nodes before it is the same request's look-up
  return normalised(*e, model);
}

GraphUpdateResult GraphRegistry::update(const std::string& id, const GraphOwner& owner,
                                        const GraphUpdate& u) {
  const std::shared_ptr<GraphEntry> e = find(id);
  if (e->owner != owner.id()) {
    ++misses_;
    throw NotFound("unknown graph id '" + id + "' (or registered by another owner)");
  }
  ++hits_;
  std::lock_guard lock(e->mu);
  // What the graph holds counts against the client that holds it: its key and the address it
  // registered from (the shares count graphs by that address).
  const GraphOwner holder{owner.key, e->address};
  // A graph registered without features takes updates as adjacency lists, which hold far more than
  // its edge list: 2^30 nodes and one edge are 16 bytes as registered, tens of GiB as adjacency.
  // Within the quotas before it is built, and kept only once an update applies to it.
  std::unique_ptr<DynamicGraph> fresh;
  const std::size_t registered_bytes = e->dynamic ? 0 : edge_bytes(e->edges);
  if (!e->dynamic) {
    if (!e->edges.weight.empty())
      throw InputError(
          "graph",
          "'" + id + "' was registered with edge_weight; a weighted graph takes no updates");
    const std::size_t most = DynamicGraph::bytes_for(e->edges.num_nodes, e->edges.num_edges(), 0);
    {
      std::lock_guard reg(mu_);
      check_growth_locked(holder, most > registered_bytes ? most - registered_bytes : 0,
                          "this graph, to take updates,");
    }
    fresh = std::make_unique<DynamicGraph>(e->edges, HostTensor{});
  }
  DynamicGraph& g = fresh ? *fresh : *e->dynamic;
  g.check(u);
  // What it adds, about as DynamicGraph::bytes counts: two adjacency pairs an edge, a node's
  // vectors and row.
  std::size_t need =
      u.add_src.size() * 16 +
      static_cast<std::size_t>(u.add_nodes) * (64 + static_cast<std::size_t>(g.feature_len()) * 4);
  const bool converted = fresh != nullptr;
  if (converted && fresh->bytes() > registered_bytes) need += fresh->bytes() - registered_bytes;
  // From now on it is kept: its first snapshot is written under the entry's lock only (not the
  // registry's, which every graph's requests take), and taken back if the update goes no further.
  if (fresh && store_) store_->save(e->id, e->owner, e->address, *fresh);
  {
    std::lock_guard reg(mu_);
    try {
      if (!registered_locked(*e))
        throw NotFound("unknown graph id '" + id + "' (deleted meanwhile)");
      check_growth_locked(holder, need, "this update");
    } catch (...) {
      if (fresh && store_) store_->remove(e->id);
      throw;
    }
    if (fresh) {
      e->dynamic = std::move(fresh);
      e->edges = {};
    }
  }
  if (converted) account(*e);
  std::optional<std::uint64_t> logged_at;
  if (store_) {  // kept before it applies
    try {
      logged_at = store_->append(id, u, g.version() + 1);
    } catch (...) {
      std::lock_guard reg(mu_);
      if (!registered_locked(*e))
        throw NotFound("unknown graph id '" + id + "' (deleted meanwhile)");
      throw;
    }
  }
  GraphChange change;
  try {
    change = g.apply(u);  // checked above: only memory can fail it, and then it changed nothing
  } catch (...) {
    if (logged_at) {
      try {
        store_->take_back(id, *logged_at);  // a replay must not apply what the client saw refused
      } catch (const std::exception&) {
        // The record stays: a restart would apply it. Nothing better is left to do here.
      }
    }
    throw;
  }
  if (store_ && GraphStore::compact_due(g.version())) {
    try {
      store_->save(id, e->owner, e->address, g, /*create=*/false);
    } catch (const std::exception&) {
      // The log still holds every update: a later compaction, or the replay, takes them.
    }
    // A deletion while the snapshot was written (its folder gone, then written again) leaves
    // nothing behind: a restart would bring the deleted graph back.
    std::lock_guard reg(mu_);
    if (!registered_locked(*e)) store_->remove(id);
  }
  e->normalised.clear();  // of the version before
  GraphUpdateResult result;
  result.models = bring_along(*e, g, change);
  account(*e);
  if (activation_bytes() >
      limits_.max_activation_bytes) {  // grown past the bound: recompute from here on
    e->activations.clear();
    account(*e);
  }
  result.version = g.version();
  result.nodes = g.nodes();
  result.edges = g.num_edges();
  return result;
}

std::size_t GraphRegistry::activation_bytes() const {
  std::lock_guard lock(mu_);
  return activation_bytes_;
}

bool GraphRegistry::remove(const std::string& id, const GraphOwner* owner) {
  std::lock_guard lock(mu_);
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return false;
  if (owner && it->second->owner != owner->id())
    return false;  // as unknown: ids are not confirmed to others
  forget_locked(*it->second);
  graphs_.erase(it);
  ++deleted_;
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
      forget_locked(*it->second);
      ++deleted_;
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
  return ids;
}

GraphSummary GraphRegistry::summary_locked(const GraphEntry& e) const {
  return {e.id,
          e.nodes,
          e.edges_count,
          e.bytes,
          std::chrono::duration<double>(Clock::now() - e.last_used).count(),
          e.address,
          e.owner.rfind("key ", 0) == 0,
          e.version,
          e.feature_len,
          e.activation_bytes};
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

std::string GraphRegistry::metrics_text() {
  std::lock_guard lock(mu_);
  drop_idle_locked();
  std::ostringstream o;
  const auto family = [&](const char* name, const char* type, const char* help) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  family("dype_graph_registry_graphs", "gauge", "Graphs registered now.");
  o << "dype_graph_registry_graphs " << graphs_.size() << '\n';
  family("dype_graph_registry_max_graphs", "gauge",
         "Graphs the registry holds at most (--max-graphs).");
  o << "dype_graph_registry_max_graphs " << limits_.max_graphs << '\n';
  family("dype_graph_registry_bytes", "gauge",
         "Bytes the registered graphs hold (edges, stored features, normalised graphs).");
  o << "dype_graph_registry_bytes " << bytes_ << '\n';
  family("dype_graph_registry_max_bytes", "gauge",
         "Bytes the registry holds at most (--max-graph-bytes).");
  o << "dype_graph_registry_max_bytes " << limits_.max_bytes << '\n';
  family("dype_graph_activation_bytes", "gauge",
         "Bytes of GNN activations kept for incremental inference over registered graphs (every "
         "graph's together; per graph in /v2/dype/admin/graphs).");
  o << "dype_graph_activation_bytes " << activation_bytes_ << '\n';
  family("dype_graph_activation_bytes_limit", "gauge",
         "The bound on kept activations (--graph-activation-bytes).");
  o << "dype_graph_activation_bytes_limit " << limits_.max_activation_bytes << '\n';
  family(
      "dype_graph_registrations_total", "counter",
      "Graph registrations, accepted or refused (the registry, or a client's share of it, full).");
  o << "dype_graph_registrations_total{outcome=\"accepted\"} " << accepted_ << '\n'
    << "dype_graph_registrations_total{outcome=\"refused\"} " << refused_ << '\n';
  family("dype_graph_lookups_total", "counter",
         "Requests (inferences, updates) naming a graph id: served from the graph (hit), or the "
         "id unknown or expired (miss).");
  o << "dype_graph_lookups_total{result=\"hit\"} " << hits_ << '\n'
    << "dype_graph_lookups_total{result=\"miss\"} " << misses_ << '\n';
  family("dype_graphs_removed_total", "counter",
         "Graphs removed: deleted by their owner, or expired (unused past the idle TTL).");
  o << "dype_graphs_removed_total{cause=\"deleted\"} " << deleted_ << '\n'
    << "dype_graphs_removed_total{cause=\"expired\"} " << expired_ << '\n';
  family("dype_graph_answer_mode_switches_total", "counter",
         "Times a graph's answers for a model moved between kept activations (host CPU) and the "
         "engine's pipeline, as the planner priced its updates.");
  o << "dype_graph_answer_mode_switches_total " << mode_switches_ << '\n';
  return o.str();
}

std::size_t GraphRegistry::size() const {
  std::lock_guard lock(mu_);
  return graphs_.size();
}

}  // namespace dype::rt::daemon
