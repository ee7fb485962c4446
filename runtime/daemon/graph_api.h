#pragma once
// The graph registry's operations as both front ends answer them (HTTP /v2/dype/graphs...,
// gRPC dype.graphs.DypeGraphs): registration with optional node features and updates, from
// KServe-form tensors (kserve/graph_inputs.h) to the JSON answer.
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/kserve/tensor.h"

namespace dype::rt::daemon {

// Registers the graph `in` carries (and its x); {"id", "num_nodes", "num_edges", "feature_len",
// "version"}.
nlohmann::json register_graph(GraphRegistry& graphs, const InferRequest& in, const GraphOwner& owner);

// Applies the update `in` carries to graph `id`; {"id", "version", "num_nodes", "num_edges",
// "models": {name: {"rows", "nnz", "refreshed", "changed", "changed_nodes"}}}.
nlohmann::json update_graph(GraphRegistry& graphs, const std::string& id, const InferRequest& in, const GraphOwner& owner);

}  // namespace dype::rt::daemon
