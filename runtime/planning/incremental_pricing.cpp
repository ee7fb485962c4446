#include "runtime/planning/incremental_pricing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <shared_mutex>

#include "common/error.h"

namespace dype::rt {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

int quarter_octave(std::int64_t x) {
  return static_cast<int>(
      std::lround(4.0 * std::log2(static_cast<double>(std::max<std::int64_t>(1, x)))));
}
}  // namespace

std::string to_string(AnswerMode m) {
  return m == AnswerMode::kept ? "kept" : "pipeline";
}

IncrementalPricer::IncrementalPricer(std::shared_ptr<const Model> model,
                                     std::shared_ptr<SchedPlanner> planner, PlanningState state)
    : model_(std::move(model)), planner_(std::move(planner)), state_(std::move(state)) {
  for (const hw::Device* d : planner_->system().devices())
    if (d->info().kind == hw::DeviceKind::cpu) {
      cpu_ = d;
      break;
    }
}

void IncrementalPricer::detach() {
  std::unique_lock lock(state_mu_);
  state_ = nullptr;
  cpu_ = nullptr;  // the system it belongs to may go with the engine's service
}

double IncrementalPricer::cpu_s(const kernels::OpShape& shape) const {
  if (shape.m <= 0) return 0.0;
  return planner_->predict_kernel_s(*cpu_.load(), shape);
}

std::pair<double, std::string> IncrementalPricer::pipeline_latency(std::int64_t nodes,
                                                                   std::int64_t nnz) {
  const auto state = state_ ? state_() : std::nullopt;
  if (!state) return {kInf, "none"};
  const auto& [mode, left_out] = *state;
  auto key = std::make_tuple(mode, left_out, quarter_octave(nodes), quarter_octave(nnz));
  {
    std::lock_guard lock(mu_);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  std::pair<double, std::string> out{kInf, "none"};
  try {
    Characteristics c;
    c.nodes = nodes;
    c.nnz = nnz;
    c.feature_len = model_->spec().in_features;
    sched::ObjectiveSpec obj;
    obj.objective = sched::objective_from_string(mode);
    const sched::Plan p = planner_->solve(c, obj, left_out);
    out = {p.latency_s, p.mnemonic};
  } catch (const std::exception&) {  // no plan for it (none feasible): the pipeline is no option
  }
  std::lock_guard lock(mu_);
  if (cache_.size() > 4096) cache_.clear();  // bounded: the state (mode, devices) rarely changes
  cache_.emplace(std::move(key), out);
  return out;
}

IncrementalCosts IncrementalPricer::price(const IncrementalStats& work, const SubgraphSize& answer,
                                          std::int64_t whole_nodes, std::int64_t whole_edges) {
  std::shared_lock state_lock(state_mu_);  // pricings of a model's graphs run side by side
  IncrementalCosts c;
  const Model& m = *model_;
  const bool gin = m.family() == ModelFamily::gin, sage = m.family() == ModelFamily::sage;
  const int per = gin ? 3 : 2;
  // The kernels IncrementalGnn runs for `w` (projection, aggregation over the rows' entries, and
  // GIN's second MLP layer), on the host CPU.
  auto kept = [&](const IncrementalStats& w, std::int64_t nodes) {
    double s = 0.0;
    for (std::size_t l = 0; l < w.rows.size(); ++l) {
      const Step& agg = m.step(per * static_cast<int>(l));
      const Step& up = m.step(per * static_cast<int>(l) + 1);
      const std::int64_t width = up.out_cols;
      s += cpu_s({.kind = kernels::OpKind::gemm,
                  .m = w.projected[l],
                  .k = agg.in_cols,
                  .n = width * (sage ? 2 : 1)});
      // The columns an update gathers are those of its entries, not the graph's (k = nodes would
      // price reading every row of h, which a delta never does).
      const std::int64_t cols = std::max<std::int64_t>(1, std::min(nodes, w.nnz[l]));
      s += cpu_s(
          {.kind = kernels::OpKind::spmm, .m = w.rows[l], .k = cols, .n = width, .nnz = w.nnz[l]});
      if (gin)
        s += cpu_s({.kind = kernels::OpKind::gemm,
                    .m = w.rows[l],
                    .k = width,
                    .n = m.step(per * static_cast<int>(l) + 2).out_cols});
    }
    return s;
  };
  if (!cpu_) {
    c.kept_s = c.rebuild_s = kInf;
  } else {
    IncrementalStats whole;
    const auto layers = static_cast<std::size_t>(m.spec().layers);
    whole.projected.assign(layers, whole_nodes);
    whole.rows.assign(layers, whole_nodes);
    whole.nnz.assign(layers, whole_edges + whole_nodes);
    c.rebuild_s = kept(whole, whole_nodes);
    c.kept_s = work.rebuilt ? c.rebuild_s : kept(work, whole_nodes);
  }
  std::tie(c.pipeline_s, c.pipeline_plan) = pipeline_latency(answer.nodes, answer.nnz);
  return c;
}

bool IncrementalChoice::observe(const IncrementalCosts& c) {
  // NaN says nothing (a model that predicts none): it neither adds to the excess nor clears it.
  if (std::isnan(c.kept_s) || std::isnan(c.pipeline_s) || std::isnan(c.rebuild_s)) return false;
  if (!std::isfinite(c.kept_s) && !std::isfinite(c.pipeline_s)) return false;
  const double ours = mode_ == AnswerMode::kept ? c.kept_s : c.pipeline_s;
  const double other = mode_ == AnswerMode::kept ? c.pipeline_s : c.kept_s;
  excess_s_ = std::max(0.0, excess_s_ + (ours - other));
  if (!(excess_s_ > c.rebuild_s) && std::isfinite(ours)) return false;
  if (!std::isfinite(other)) return false;
  mode_ = mode_ == AnswerMode::kept ? AnswerMode::pipeline : AnswerMode::kept;
  excess_s_ = 0.0;
  ++switches_;
  return true;
}

}  // namespace dype::rt
