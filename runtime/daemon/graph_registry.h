#pragma once
// Graphs registered once (POST /v2/dype/graphs) and referenced by id from infer requests, so a
// stream carries only features. Edges are validated at registration (kernels/graph/edge_index.h);
// the normalised runtime Graph is built once per normalisation (GCN vs GIN) and shared, so its
// device-side preloads are reused across requests.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "kernels/graph/edge_list.h"
#include "runtime/model.h"

namespace dype::rt::daemon {

struct GraphEntry {
  std::string id;
  kernels::EdgeList edges;
  std::map<std::string, std::shared_ptr<const Graph>> normalised;  // key: "gcn" | "gin:<eps>"
};

class GraphRegistry {
 public:
  explicit GraphRegistry(std::size_t max_graphs = 1024) : max_graphs_(max_graphs) {}
  // Returns the new id: "g" and 32 random hex digits, unguessable and unique across restarts. InputError when the registry is full.
  std::string add(kernels::EdgeList edges);
  // NotFound for an unknown id.
  std::int64_t num_nodes(const std::string& id) const;
  std::shared_ptr<const Graph> graph_for(const std::string& id, const Model& model);
  bool remove(const std::string& id);
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<GraphEntry>> graphs_;
  std::random_device rng_;
  std::size_t max_graphs_;
};

// The runtime Graph a model wants for these edges (GCN normalisation or GIN's 1 + eps diagonal).
std::shared_ptr<const Graph> normalise_for(const kernels::EdgeList& edges, const Model& model);

}  // namespace dype::rt::daemon
