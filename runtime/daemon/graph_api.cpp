#include "runtime/daemon/graph_api.h"

#include "common/error.h"
#include "runtime/daemon/kserve/graph_inputs.h"
#include "runtime/daemon/kserve/request_builder.h"

namespace dype::rt::daemon {

using json = nlohmann::json;

json register_graph(GraphRegistry& graphs, const InferRequest& in, const GraphOwner& owner) {
  for (const Tensor& t : in.inputs)
    if (t.name == "node_ids" || t.name == "window")
      throw InputError("input '" + t.name + "'", "not an input of a graph registration");
  HostTensor x = registered_features(in);
  std::optional<std::int64_t> num_nodes = in.int_parameter("num_nodes");
  if (!num_nodes && x.cols > 0) num_nodes = x.rows;  // the features fix the node count
  kernels::EdgeList edges = edges_from_request(in, num_nodes);
  const std::int64_t n = edges.num_nodes, e = edges.num_edges(), f = x.cols;
  const std::string id = graphs.add(std::move(edges), owner, std::move(x));
  return {{"id", id}, {"num_nodes", n}, {"num_edges", e}, {"feature_len", f}, {"version", 0}};
}

json update_graph(GraphRegistry& graphs, const std::string& id, const InferRequest& in,
                  const GraphOwner& owner) {
  const GraphUpdateResult r = graphs.update(id, owner, graph_update_from_request(in));
  // Per model whose activations the graph keeps: what it recomputed and the answer rows that
  // changed (listed up to kChangedListed; their count always).
  constexpr std::size_t kChangedListed = 4096;
  json models = json::object();
  for (const GraphUpdateResult::Model& r_m : r.models) {
    const IncrementalStats& st = r_m.stats;
    json m = {{"rows", st.rows},
              {"nnz", st.nnz},
              {"refreshed", st.refreshed},
              {"changed", st.changed.size()},
              {"answers", to_string(r_m.mode)}};
    if (st.changed.size() <= kChangedListed) m["changed_nodes"] = st.changed;
    if (r_m.costs)  // the planner's prices of this update (predicted seconds)
      m["priced"] = {{"kept_s", r_m.costs->kept_s},
                     {"pipeline_s", r_m.costs->pipeline_s},
                     {"rebuild_s", r_m.costs->rebuild_s},
                     {"pipeline_plan", r_m.costs->pipeline_plan},
                     {"version", r_m.priced_version}};
    models[r_m.name] = std::move(m);
  }
  return {{"id", id},
          {"version", r.version},
          {"num_nodes", r.nodes},
          {"num_edges", r.edges},
          {"models", models}};
}

}  // namespace dype::rt::daemon
