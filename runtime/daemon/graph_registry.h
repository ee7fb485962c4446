#pragma once
// Graphs registered once (POST /v2/dype/graphs) and referenced by id from infer requests, so a
// stream carries only features. Edges are validated at registration (graph/edge_index.h);
// the normalised runtime Graph is built once per normalisation (GCN vs GIN) and shared, so its
// device-side preloads are reused across requests.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "graph/edge_list.h"
#include "runtime/model.h"

namespace dype::rt::daemon {

// Who registered a graph: the key the client chose (the Dype-Graph-Owner header) and its address.
// A client without a key is known by its address. The owner lists and deletes its graphs; the
// quotas below count per owner and per address.
struct GraphOwner {
  std::string key;      // "" when the client sent none
  std::string address;  // the client's IP address
  std::string id() const { return key.empty() ? "address " + address : "key " + key; }
};

struct GraphEntry {
  std::string id;
  std::string owner;    // GraphOwner::id()
  std::string address;
  kernels::EdgeList edges;
  std::map<std::string, std::shared_ptr<const Graph>> normalised;  // key: "gcn" | "gin:<eps>"
  std::size_t bytes = 0;                                          // edges and normalised graphs
  std::chrono::steady_clock::time_point last_used;
};

// Bounds on what clients may park in the registry: a count, the bytes of their edges and
// normalised graphs together, and how long a graph may go unused before it is dropped (a client
// stopped mid-stream never deletes its graphs).
struct GraphRegistryLimits {
  std::size_t max_graphs = 1024;
  std::size_t max_bytes = std::size_t{2} << 30;
  double idle_ttl_s = 3600.0;  // <= 0: never dropped
  // Shares of max_graphs and max_bytes one owner, and one address, may hold (1: no per-client
  // bound), so one client cannot fill the registry and fail every other client's registrations.
  // Owner keys are chosen by clients, so the address share is what bounds a client rotating keys.
  double owner_share = 1.0;
  double address_share = 1.0;
};

// One registered graph as the admin listing shows it.
struct GraphSummary {
  std::string id;
  std::int64_t nodes = 0, edges = 0;
  std::size_t bytes = 0;
  double idle_s = 0.0;
  std::string address;  // who registered it (owner keys are never listed)
  bool keyed = false;   // registered with an owner key
};

class GraphRegistry {
 public:
  explicit GraphRegistry(GraphRegistryLimits limits = {}) : limits_(limits) {}
  // Returns the new id: "g" and 32 random hex digits, unguessable and unique across restarts.
  // InputError when the registry, or the owner's or address's share of it, is full (count or
  // bytes); graphs idle past the TTL go first.
  std::string add(kernels::EdgeList edges, const GraphOwner& owner = {});
  // NotFound for an unknown or expired id.
  std::int64_t num_nodes(const std::string& id);
  std::shared_ptr<const Graph> graph_for(const std::string& id, const Model& model);
  // false when no such graph, or `owner` (when given) did not register it.
  bool remove(const std::string& id, const GraphOwner* owner = nullptr);
  // Removes every graph of `owner`; their ids.
  std::vector<std::string> remove_all(const GraphOwner& owner);
  std::size_t size() const;
  std::size_t bytes() const;
  std::vector<GraphSummary> list();  // by id
  std::vector<GraphSummary> list(const GraphOwner& owner);  // the owner's, by id
  const GraphRegistryLimits& limits() const { return limits_; }

 private:
  // Under mu_: the live entry of `id` (touched), or NotFound; drops idle ones on the way.
  std::shared_ptr<GraphEntry> find_locked(const std::string& id);
  void drop_idle_locked();
  void check_share_locked(const GraphOwner& owner, std::size_t need) const;
  GraphSummary summary_locked(const GraphEntry& e) const;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<GraphEntry>> graphs_;
  std::random_device rng_;
  GraphRegistryLimits limits_;
  std::size_t bytes_ = 0;
};

// The runtime Graph a model wants for these edges (GCN normalisation or GIN's 1 + eps diagonal).
std::shared_ptr<const Graph> normalise_for(const kernels::EdgeList& edges, const Model& model);

}  // namespace dype::rt::daemon
