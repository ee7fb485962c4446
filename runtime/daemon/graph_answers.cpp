#include "runtime/daemon/graph_registry.h"

#include <bit>
#include <cstdlib>

// The registry's answers: a graph's stored features (whole, or the computation subgraph of the
// rows asked for), the kept activations answered from and brought along by each update, and the
// planner's prices of each update that move a model's answers between them and the pipeline.
namespace dype::rt::daemon {

namespace {
const DynamicGraph& features_of(const GraphEntry& e) {
  if (!e.dynamic || !e.dynamic->has_features())
    throw InputError("input 'x'", "missing, and graph '" + e.id +
                                      "' was registered without features (send x, or "
                                      "register the graph with x)");
  return *e.dynamic;
}
}  // namespace

GraphRegistry::Stored GraphRegistry::stored(const std::string& id, const Model& model,
                                            std::optional<std::uint64_t> version) {
  const std::shared_ptr<GraphEntry> e = find(id);
  std::lock_guard lock(e->mu);
  const DynamicGraph& g = features_of(*e);
  check_version(*e, version);
  ++hits_;
  return {normalised(*e, model), g.features(), g.version(), {}};
}

GraphRegistry::Stored GraphRegistry::stored_rows(const std::string& id, const Model& model,
                                                 std::optional<std::uint64_t> version,
                                                 std::span<const std::int64_t> node_ids) {
  const std::shared_ptr<GraphEntry> e = find(id);
  std::lock_guard lock(e->mu);
  const DynamicGraph& g = features_of(*e);
  check_version(*e, version);
  ++hits_;
  std::shared_ptr<const Graph> whole = normalised(*e, model);
  ComputationSubgraph sub = computation_subgraph(*whole, node_ids, model.spec().layers);
  if (!sub.graph)  // the answers read every node
    return {std::move(whole), g.features(), g.version(),
            std::vector<std::int64_t>(node_ids.begin(), node_ids.end())};
  return {std::move(sub.graph), take_rows(g.features(), sub.nodes), g.version(),
          std::move(sub.rows_wanted)};
}

std::optional<HostTensor> GraphRegistry::answer_kept(
    const std::string& id, const std::string& model_name, const std::shared_ptr<const Model>& model,
    std::span<const std::int64_t> node_ids, std::optional<std::uint64_t> version,
    std::uint64_t* answered_version, std::shared_ptr<IncrementalPricer> pricer) {
  if (!model->is_gnn()) return std::nullopt;
  const std::shared_ptr<GraphEntry> e = find(id);
  std::lock_guard lock(e->mu);
  const DynamicGraph& g = features_of(*e);
  check_version(*e, version);
  GraphEntry::Kept& kept = e->activations[model_name];
  if (kept.model != model) {  // computed (or priced) with a version since reloaded
    kept.gnn.reset();
    kept.choice = {};
    kept.last.reset();  // priced with the old version's planner
    kept.since_priced = 0;
    kept.size_octave = -1;
    kept.priced_rebuilt = false;
    kept.model = model;
    account(*e);  // their bytes are free: the new version's are counted in their place
  }
  if (pricer && pricer->host_cpu()) kept.pricer = std::move(pricer);
  if (kept.choice.mode() == AnswerMode::pipeline) return std::nullopt;  // priced cheaper there
  if (!kept.gnn) {
    const std::size_t need = IncrementalGnn::bytes_for(*model, g.nodes());
    {
      std::lock_guard reg(mu_);
      if (activation_bytes_ + need > limits_.max_activation_bytes) {
        e->activations.erase(model_name);
        return std::nullopt;
      }
    }
    try {
      kept.gnn = std::make_unique<IncrementalGnn>(model, g);
    } catch (...) {
      e->activations.erase(model_name);
      throw;
    }
    account(*e);
    if (activation_bytes() > limits_.max_activation_bytes) {  // others were built beside it
      e->activations.erase(model_name);
      account(*e);
      return std::nullopt;
    }
  }
  if (answered_version) *answered_version = g.version();
  ++hits_;  // only when answered here: otherwise the request goes on to stored(), which counts it
  return node_ids.empty() ? kept.gnn->output() : kept.gnn->rows(node_ids);
}

std::vector<GraphUpdateResult::Model> GraphRegistry::bring_along(GraphEntry& e,
                                                                 const DynamicGraph& g,
                                                                 const GraphChange& change) {
  std::vector<GraphUpdateResult::Model> out;
  for (auto it = e.activations.begin(); it != e.activations.end();) {
    GraphEntry::Kept& k = it->second;
    if (k.pricer && !k.pricer->host_cpu()) {  // its engine is gone (the model unloaded)
      k.pricer.reset();
      k.choice = {};
      k.last.reset();
    }
    if (!k.gnn && !k.pricer) {  // nothing kept and nothing to price
      it = e.activations.erase(it);
      continue;
    }
    GraphUpdateResult::Model m{it->first, {}, k.choice.mode(), std::nullopt, 0};
    try {
      if (k.gnn)
        m.stats = k.gnn->update(g, change);
      else
        m.stats = IncrementalGnn::reach(*k.model, g, change);  // what keeping would cost
    } catch (...) {
      it = e.activations.erase(it);  // recomputed whole on next use, never answered stale
      continue;
    }
    if (k.pricer) {
      // Priced again when the answer's size (the rows it changed) moves two octaves (a factor of
      // 4: one-edge updates vary by less, a hub's reach by more), and every kRepriceEvery updates;
      // otherwise the last prices stand.
      const int octave = std::bit_width(static_cast<std::uint64_t>(m.stats.changed.size()));
      // A bulk update (every layer recomputed), and the one after it, are always priced: their
      // prices differ in kind.
      if (!k.last || m.stats.rebuilt || k.priced_rebuilt || std::abs(octave - k.size_octave) >= 2 ||
          ++k.since_priced >= GraphEntry::Kept::kRepriceEvery) {
        try {
          // A bulk update changes every answer row: the whole graph, without a walk.
          const SubgraphSize answer =
              m.stats.rebuilt
                  ? SubgraphSize{g.nodes(), g.num_edges() + g.nodes()}
                  : computation_subgraph_size(g, m.stats.changed, k.model->spec().layers);
          k.last = k.pricer->price(m.stats, answer, g.nodes(), g.num_edges());
          k.priced_version = g.version();
          k.priced_rebuilt = m.stats.rebuilt;
        } catch (const std::exception&) {
          // Not priced this time: the mode and the activations stand, the last prices too.
        }
        k.size_octave = octave;
        k.since_priced = 0;
      }
      m.costs = k.last;
      m.priced_version = k.priced_version;
      if (m.costs && k.choice.observe(*m.costs)) {
        ++mode_switches_;
        k.gnn.reset();  // to the pipeline: freed; back to kept: rebuilt on the next answer
      }
      m.mode = k.choice.mode();
    }
    out.push_back(std::move(m));
    ++it;
  }
  return out;
}

}  // namespace dype::rt::daemon
