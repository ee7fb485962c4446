#pragma once
// Graphs registered once (POST /v2/dype/graphs) and referenced by id from infer requests, so a
// stream carries only features, or nothing at all when the graph was registered with its node
// features. Edges are validated at registration (graph/edge_index.h); the normalised runtime Graph
// is built once per normalisation (GCN vs GIN) and version and shared, so its device-side preloads
// are reused across requests.
//
// A graph registered without edge weights takes updates (edges added and removed, nodes added,
// feature rows set; runtime/incremental/dynamic_graph.h), each whole or not at all and numbered by
// the graph's version. For a GNN asked about a graph's stored features, the registry keeps every
// layer's activations (runtime/incremental/incremental_gnn.h), so that the answer after an update
// costs only the rows the update reached; bounded by max_activation_bytes, past which inference
// runs through the engine instead (never a stale answer): the whole graph, or for node_ids their
// computation subgraph. The planner prices each update both ways (graph_answers.cpp).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "graph/edge_list.h"
#include "runtime/daemon/graph_store.h"
#include "runtime/incremental/computation_subgraph.h"
#include "runtime/incremental/dynamic_graph.h"
#include "runtime/incremental/incremental_gnn.h"
#include "runtime/model.h"
#include "runtime/planning/incremental_pricing.h"

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
  std::string owner;  // GraphOwner::id()
  std::string address;
  // Under the registry's lock: what listings show, and the bytes counted against its quotas.
  std::int64_t nodes = 0, edges_count = 0, feature_len = 0;
  std::uint64_t version = 0;
  std::size_t bytes = 0;             // edges (or the dynamic graph) and normalised graphs
  std::size_t activation_bytes = 0;  // kept activations (their own bound)
  std::chrono::steady_clock::time_point last_used;

  // Under `mu` (an inference reads one version, an update writes the next whole).
  std::mutex mu;
  kernels::EdgeList edges;                // a weighted graph (it takes no updates)
  std::unique_ptr<DynamicGraph> dynamic;  // an unweighted one: edges, features, version
  std::map<std::string, std::shared_ptr<const Graph>> normalised;  // key: "gcn" | "gin:<eps>"
  struct Kept {
    std::shared_ptr<const Model> model;   // the model (version) they were computed with
    std::unique_ptr<IncrementalGnn> gnn;  // none while answers come from the pipeline
    // Prices each update both ways (runtime/planning/incremental_pricing.h); none: always kept.
    std::shared_ptr<IncrementalPricer> pricer;
    IncrementalChoice choice;
    std::optional<IncrementalCosts> last;  // the latest update's prices
    // Pricing walks the answer's neighbourhood and asks the planner: a stream of like updates is
    // priced every kRepriceEvery and whenever an update's size changes octave; the others reuse
    // the last prices.
    static constexpr int kRepriceEvery = 64;
    int since_priced = 0;
    int size_octave = -1;
    std::uint64_t priced_version = 0;  // the graph version `last` was priced at
    bool priced_rebuilt = false;       // `last` priced a bulk update
  };
  std::map<std::string, Kept> activations;  // by model name
};

// What one applied update changed, per model whose activations the graph keeps.
struct GraphUpdateResult {
  std::uint64_t version = 0;
  std::int64_t nodes = 0, edges = 0;
  struct Model {
    std::string name;
    IncrementalStats stats;  // recomputed (kept), or what keeping would recompute (pipeline)
    AnswerMode mode = AnswerMode::kept;  // where its answers come from after this update
    // The planner's prices, when priced: of this update, or of the like update priced at
    // priced_version (a stream of like updates is priced once in kRepriceEvery).
    std::optional<IncrementalCosts> costs;
    std::uint64_t priced_version = 0;
  };
  std::vector<Model> models;
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
  // Every graph's kept activations together (incremental inference); 0: none are kept.
  std::size_t max_activation_bytes = std::size_t{1} << 30;
};

// One registered graph as the admin listing shows it.
struct GraphSummary {
  std::string id;
  std::int64_t nodes = 0, edges = 0;
  std::size_t bytes = 0;
  double idle_s = 0.0;
  std::string address;  // who registered it (owner keys are never listed)
  bool keyed = false;   // registered with an owner key
  std::uint64_t version = 0;
  std::int64_t feature_len = 0;  // stored features per node (0: none)
  std::size_t activation_bytes = 0;
};

class GraphRegistry {
 public:
  explicit GraphRegistry(GraphRegistryLimits limits = {}) : limits_(limits) {}
  // Returns the new id: "g" and 32 random hex digits, unguessable and unique across restarts.
  // InputError when the registry, or the owner's or address's share of it, is full (count or
  // bytes); graphs idle past the TTL go first.
  // x: the nodes' features (stored with the graph; none: cols 0), counted against the quotas.
  std::string add(kernels::EdgeList edges, const GraphOwner& owner = {}, HostTensor x = {});
  // NotFound for an unknown or expired id.
  std::int64_t num_nodes(const std::string& id);
  // `version`: as stored() checks it.
  std::shared_ptr<const Graph> graph_for(const std::string& id, const Model& model,
                                         std::optional<std::uint64_t> version = std::nullopt);

  // The graph and its stored features at one version, for the engine (a copy of the features:
  // an update may change them while the request runs). `version`: InputError naming
  // parameters.graph_version unless it is the current one. InputError when none are stored.
  struct Stored {
    std::shared_ptr<const Graph> graph;
    HostTensor x;
    std::uint64_t version = 0;
    std::vector<std::int64_t> rows_wanted;  // stored_rows: the answer rows in `graph`'s numbering
  };
  Stored stored(const std::string& id, const Model& model, std::optional<std::uint64_t> version);
  // stored() for the answer rows `node_ids` (each in range) of a GNN: the graph's computation
  // subgraph for them (runtime/incremental/computation_subgraph.h) with its nodes' features only,
  // or the whole graph when the subgraph is all of it. What the engine then runs, and the planner
  // prices, is the work those rows need.
  Stored stored_rows(const std::string& id, const Model& model,
                     std::optional<std::uint64_t> version, std::span<const std::int64_t> node_ids);
  // The answer of `model` (served as `model_name`) over the stored features, rows `node_ids` (all
  // when empty), from the kept activations: computed on first use, brought along by every update.
  // nullopt when they would not fit max_activation_bytes (the caller runs the engine instead), the
  // model is not a GNN, or no features are stored.
  // `pricer` (may be null): prices every later update of this graph both ways, kept activations
  // or the engine's pipeline (runtime/planning/incremental_pricing.h), and the graph's answers for
  // the model move to the cheaper (nullopt here while they come from the pipeline).
  std::optional<HostTensor> answer_kept(const std::string& id, const std::string& model_name,
                                        const std::shared_ptr<const Model>& model,
                                        std::span<const std::int64_t> node_ids,
                                        std::optional<std::uint64_t> version,
                                        std::uint64_t* answered_version,
                                        std::shared_ptr<IncrementalPricer> pricer = nullptr);
  // Applies `update` whole to the graph `owner` registered (NotFound for another's), brings every
  // kept activation along and returns the new version. InputError (nothing applied) when the
  // update cannot apply, the graph has edge weights, or it would pass the byte quotas: the
  // registry's, and the owner's and address's shares of it (a graph registered without features
  // counts its adjacency lists from its first update on).
  GraphUpdateResult update(const std::string& id, const GraphOwner& owner,
                           const GraphUpdate& update);
  std::size_t activation_bytes() const;
  // Keeps the graphs that take updates in `store` from now on (registration, every update,
  // deletion) after loading those it holds, each at its last version; what happened, for the log.
  std::vector<std::string> persist(std::shared_ptr<GraphStore> store);
  // false when no such graph, or `owner` (when given) did not register it.
  bool remove(const std::string& id, const GraphOwner* owner = nullptr);
  // Removes every graph of `owner`; their ids.
  std::vector<std::string> remove_all(const GraphOwner& owner);
  std::size_t size() const;
  std::size_t bytes() const;
  std::vector<GraphSummary> list();                         // by id
  std::vector<GraphSummary> list(const GraphOwner& owner);  // the owner's, by id
  const GraphRegistryLimits& limits() const { return limits_; }
  // The registry's Prometheus lines (text format 0.0.4): graphs, bytes and kept activation bytes
  // against their limits, registrations accepted and refused, requests naming a graph id that
  // found it or not, graphs removed by their owner or dropped idle. Drops idle graphs first, so the
  // gauges are current.
  std::string metrics_text();

 private:
  // Under mu_: the live entry of `id` (touched), or NotFound; drops idle ones on the way.
  std::shared_ptr<GraphEntry> find_locked(const std::string& id);
  std::shared_ptr<GraphEntry> find(const std::string& id);
  // Under e.mu: the normalised graph of the current version (built on first use); `e`'s bytes,
  // activation bytes and listing fields brought up to date (takes the registry's lock inside).
  std::shared_ptr<const Graph> normalised(GraphEntry& e, const Model& model);
  void account(GraphEntry& e);
  void check_version(const GraphEntry& e, std::optional<std::uint64_t> version) const;
  void forget_locked(const GraphEntry& e);  // its bytes off the totals, as it leaves
  void drop_idle_locked();
  // InputError when `owner`'s or its address's share cannot take `need` more bytes (`what` needs
  // them) or, for a new graph, one more graph.
  void check_share_locked(const GraphOwner& owner, std::size_t need, const std::string& what,
                          bool new_graph) const;
  // InputError when the registry, or the share of `holder` (the key and address a graph is counted
  // under), cannot take `need` more bytes for a graph already registered.
  void check_growth_locked(const GraphOwner& holder, std::size_t need,
                           const std::string& what) const;
  // Whether `e` is still the entry registered under its id.
  bool registered_locked(const GraphEntry& e) const;
  GraphSummary summary_locked(const GraphEntry& e) const;
  // Under e.mu, after `change` applied to `g`: every kept model brought along (or, while its
  // answers come from the pipeline, what keeping would recompute) and priced (graph_answers.cpp).
  std::vector<GraphUpdateResult::Model> bring_along(GraphEntry& e, const DynamicGraph& g,
                                                    const GraphChange& change);

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<GraphEntry>> graphs_;
  std::random_device rng_;
  GraphRegistryLimits limits_;
  std::size_t bytes_ = 0;
  std::size_t activation_bytes_ = 0;
  std::shared_ptr<GraphStore> store_;  // set once, before serving
  // Counted as the registry works; atomic, since look-ups are counted under a graph's own lock.
  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, hits_{0}, misses_{0}, deleted_{0},
      expired_{0};
  std::atomic<std::uint64_t> mode_switches_{0};  // graphs' answers moved between kept and pipeline
};

// The runtime Graph a model wants for these edges (GCN normalisation or GIN's 1 + eps diagonal).
std::shared_ptr<const Graph> normalise_for(const kernels::EdgeList& edges, const Model& model);

}  // namespace dype::rt::daemon
