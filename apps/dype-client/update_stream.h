#pragma once
// `dype-client stream --updates`: a streaming graph. The graph is registered once with its node
// features; then a sequence of updates goes to POST /v2/dype/graphs/{id}/update, each followed by
// an inference that names the graph and no features, for the nodes the update changed (node_ids,
// the update's answer lists them) or the whole graph when it changed too many to list.
//
// Updates come from a file or are generated as a drifting stream:
//   file     one update per line, its changes separated by ';' ('#' starts a comment):
//              + S T          add the edge S -> T
//              - S T          remove one edge S -> T
//              n v1 ... vF    add a node (the next id) with its feature row
//              x R v1 ... vF  set node R's feature row
//            e.g. "+ 3 7; + 4 9; - 1 2"
//   drift    "at:k,at:k": from update `at` on, each update adds k random edges (e.g. "0:2,300:5000":
//            a few edges per update, then bulk loads)
// Printed: updates/s, the update's and the answer's latency (measured at the client), the rows the
// daemon recomputed, and the plan epoch of the model, each second and in a summary.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/edge_list.h"
#include "runtime/incremental/dynamic_graph.h"
#include "transport.h"

namespace dype::client {

struct UpdateStreamOptions {
  std::string model;
  kernels::EdgeList graph;   // registered first, with generated features
  std::string updates_file;  // or, when empty, `drift`
  std::string drift = "0:2";
  int updates = 200;         // with drift: how many
  bool answer = true;        // ask for the changed rows after each update
  std::uint64_t seed = 1;
};

// One line of an update file; InputError naming the change otherwise. `features`: the width a
// row must have (ids, new nodes' included, are the server's to check against the graph).
rt::GraphUpdate parse_update_line(const std::string& line, std::int64_t features);

// Runs the stream; 0 when every update and answer succeeded.
int run_update_stream(const Endpoint& ep, Protocol protocol, const UpdateStreamOptions& o);

}  // namespace dype::client
