#pragma once
// Where a registered graph's answers come from after its updates, priced by the planner:
//  - kept: every layer's activations live in host memory and each update recomputes only the rows
//    it reaches (runtime/incremental/incremental_gnn.h), on the host CPU;
//  - pipeline: nothing is kept; an answer for some nodes runs their computation subgraph
//    (runtime/incremental/computation_subgraph.h) through the engine's pipeline.
// The kept cost is the host CPU's time for the rows and entries each layer recomputes (the update's
// own figures), priced by the CPU's performance models like any kernel. The pipeline cost is the
// latency of the DyPe plan for the answer's computation subgraph, as a graph of its nodes and nnz,
// under the engine's objective and without the devices it leaves out. So the planner sees an
// incremental request the way it sees a whole graph, and a stream of small updates is priced as the
// small work it is, while bulk loads are priced as the whole graphs they become.
//
// IncrementalChoice turns the prices into a mode with hysteresis, as in ski rental: going back to
// kept costs a rebuild (the whole forward on the host CPU), so a graph changes mode only once the
// other mode would have saved more than one rebuild since it last was the cheaper one.
//
//   rt::IncrementalPricer pricer(model, planner, [&] {
//     const auto s = engine.planning_state();
//     return std::optional{std::pair{s.mode, s.left_out}};
//   });
//   rt::IncrementalCosts c = pricer.price(stats, computation_subgraph_size(g, stats.changed, 2),
//                                         g.nodes(), g.num_edges());
//   if (choice.observe(c)) log("answers now from " + to_string(choice.mode()));
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <tuple>

#include "runtime/incremental/computation_subgraph.h"
#include "runtime/incremental/incremental_gnn.h"
#include "runtime/model.h"
#include "runtime/planning/planner.h"

namespace dype::rt {

// Predicted seconds (modelled, or from fitted performance models: the planner's kernel times).
struct IncrementalCosts {
  double kept_s = 0.0;      // this update's recompute of the kept activations, host CPU
  double pipeline_s = 0.0;  // the answer's computation subgraph through the planned pipeline
  double rebuild_s =
      0.0;  // every layer of the whole graph, host CPU (what going back to kept costs)
  std::string pipeline_plan;  // the plan priced ("1C", "1G1G", ...)
};

class IncrementalPricer {
 public:
  // What a plan made now would be for: the objective and the devices left out (Engine::
  // planning_state's mode and left_out).
  // nullopt once the engine is gone (the model unloaded): the pipeline is then no option.
  using PlanningState =
      std::function<std::optional<std::pair<std::string, std::set<std::string>>>()>;
  // host_cpu() is false when the system has no CPU device to price kept work with.
  IncrementalPricer(std::shared_ptr<const Model> model, std::shared_ptr<SchedPlanner> planner,
                    PlanningState state);

  bool host_cpu() const { return cpu_ != nullptr; }
  // The engine is going away: from now on the pipeline is no option (never asks `state` again).
  void detach();
  // `work`: what the kept activations recompute for the update (IncrementalGnn::update's figures,
  // or reach()'s when none are kept); `answer`: the computation subgraph of the rows it changed;
  // `whole`: the graph's nodes and edges now.
  IncrementalCosts price(const IncrementalStats& work, const SubgraphSize& answer,
                         std::int64_t whole_nodes, std::int64_t whole_edges);

 private:
  double cpu_s(const kernels::OpShape& shape) const;
  // The plan's latency for a graph of this size, cached by quarter-octave of nodes and nnz (a solve
  // takes about a millisecond; an update stream prices thousands a second).
  std::pair<double, std::string> pipeline_latency(std::int64_t nodes, std::int64_t nnz);

  std::shared_ptr<const Model> model_;
  std::shared_ptr<SchedPlanner> planner_;
  // Shared while pricing, exclusive in detach(), which so waits for pricings under way to finish.
  std::shared_mutex state_mu_;
  PlanningState state_;
  std::atomic<const hw::Device*> cpu_{nullptr};
  std::mutex mu_;
  std::map<std::tuple<std::string, std::set<std::string>, int, int>, std::pair<double, std::string>>
      cache_;
};

enum class AnswerMode { kept, pipeline };
std::string to_string(AnswerMode m);

class IncrementalChoice {
 public:
  // Takes one update's prices; true when the mode changed.
  bool observe(const IncrementalCosts& c);
  AnswerMode mode() const { return mode_; }
  std::uint64_t switches() const { return switches_; }
  // Seconds the other mode would have saved since the current one was last the cheaper.
  double excess_s() const { return excess_s_; }

 private:
  AnswerMode mode_ = AnswerMode::kept;
  double excess_s_ = 0.0;
  std::uint64_t switches_ = 0;
};

}  // namespace dype::rt
