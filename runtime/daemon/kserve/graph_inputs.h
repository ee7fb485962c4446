#pragma once
// The tensors of graph registration and graph updates (POST /v2/dype/graphs and
// /v2/dype/graphs/{id}/update, in KServe's inference-request form, JSON or binary):
//   registration  the graph (edge_index or indptr + indices, as an inference carries it) and,
//                 optionally, x FP32 [N, F]: the nodes' features, kept with the graph
//   update        add_edges INT64 [2, k], remove_edges INT64 [2, k], add_nodes FP32 [a, F] (the
//                 new nodes' feature rows; INT64 [1], a count, for a graph without features),
//                 set_rows INT64 [r] with x FP32 [r, F]
#include <optional>

#include "runtime/daemon/kserve/tensor.h"
#include "runtime/incremental/dynamic_graph.h"
#include "runtime/model.h"

namespace dype::rt::daemon {

// x, when the registration carries it (none: cols 0).
HostTensor registered_features(const InferRequest& in);

// The update a request carries; InputError naming the input when a tensor has the wrong name, rank,
// type or shape. Ranges and existence are the graph's to check (DynamicGraph::check).
GraphUpdate graph_update_from_request(const InferRequest& in);

}  // namespace dype::rt::daemon
