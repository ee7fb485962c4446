#include "runtime/planning/planning_case.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "hw/system_file.h"
#include "common/error.h"
#include "scheduler/baselines.h"

namespace dype::rt {

namespace {

ScheduleInputs with_transfers(ScheduleInputs si, const std::optional<sched::TransferMode>& transfers) {
  if (transfers) si.system.transfers = *transfers;
  return si;
}

}  // namespace

PlanningCase::PlanningCase(CaseSpec spec) : spec_(std::move(spec)) {
  if (spec_.choose_images) {
    try {
      images_ = candidate_images(hw::load_system_config(spec_.system_file));
    } catch (const InputError&) {
      // a scheduler-only system file (kinds:): no images; load_schedule_inputs reads it
    }
  }
  const auto load = [&](const ImageAssignment* a) {
    return with_transfers(load_schedule_inputs(spec_.system_file, spec_.model, spec_.input, spec_.perfmodels_dir,
                                               a ? &images_ : nullptr, a, spec_.cost_model),
                          spec_.transfers);
  };
  ScheduleInputs as_loaded = load(nullptr);
  if (images_.options.size() > 1) {
    ImageAssignment as_file;
    for (const auto& opt : images_.options) as_file.push_back(opt.loaded);
    assignments_ = image_assignments(images_);
    for (std::size_t i = 0; i < assignments_.size(); ++i) {
      if (assignments_[i] == as_file) {
        loaded_ = i;
        systems_.push_back(std::move(as_loaded));
      } else {
        systems_.push_back(load(&assignments_[i]));
      }
    }
  } else {
    systems_.push_back(std::move(as_loaded));
  }
  if (!spec_.flat_only) shapes_ = sched::recurrent_shapes(loaded().workload);
}

std::optional<sched::Plan> PlanningCase::plan_on(std::size_t i, const sched::ObjectiveSpec& objective,
                                                 sched::SolverKind solver, const std::string& baseline,
                                                 double score_limit) const {
  const ScheduleInputs& si = systems_.at(i);
  if (!baseline.empty()) return sched::baseline(baseline, si.system, *si.model, si.workload, objective);
  sched::Plan p = sched::solve_shapes(si.system, *si.model, shapes_, objective, solver,
                                      sched::coordinator_recurrence(si.system), {.score_limit = score_limit});
  if (p.empty()) return std::nullopt;  // every plan scores above the limit
  return p;
}

CasePlan PlanningCase::plan(const sched::ObjectiveSpec& objective, sched::SolverKind solver,
                            const std::string& baseline) const {
  if (!baseline.empty()) {
    const auto names = sched::baseline_names(loaded().system);
    if (std::find(names.begin(), names.end(), baseline) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw InputError("baseline", "unknown baseline '" + baseline + "' (this system has: " + list + ")");
    }
  }
  CasePlan out;
  if (assignments_.empty()) {
    out.plan = *plan_on(0, objective, solver, baseline);
    return out;
  }
  const sched::SystemSpec& sys = loaded().system;
  const int fpga = sys.kind_index("fpga");
  const double p_exec = fpga >= 0 ? sys.kinds[static_cast<std::size_t>(fpga)].power.exec_w : 0.0;
  const auto choose = [&] {
    if (baseline.empty())
      return choose_images_for(
          images_, assignments_,
          [&](std::size_t i, const sched::ObjectiveSpec& o, double score_limit) {
            return plan_on(i, o, solver, "", score_limit);
          },
          objective, spec_.reload_horizon, p_exec);
    // theoretical-additive is a throughput sum: its images are the ones that give the most.
    return choose_images(
        images_, assignments_, [&](std::size_t i) { return *plan_on(i, objective, solver, baseline); },
        spec_.reload_horizon, p_exec, baseline == "theoretical-additive" ? sched::Objective::perf : objective.objective);
  };
  std::optional<ImageChoice> chosen;
  try {
    chosen = choose();
  } catch (const sched::InfeasibleError&) {
    // Each assignment diagnosed its own images; a throughput floor out of reach is said with the
    // fastest plan over every assignment.
    if (!(objective.min_throughput_per_s > 0) || !baseline.empty()) throw;
    double fastest = sched::kInf;
    for (std::size_t i = 0; i < systems_.size(); ++i) {
      try {
        fastest = std::min(fastest, plan_on(i, {.objective = sched::Objective::perf}, solver, "")->period_s);
      } catch (const sched::InfeasibleError&) {
      }
    }
    if (sched::within(fastest, 1.0 / objective.min_throughput_per_s)) throw;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: min throughput %.4g/s infeasible: best achievable %.4g/s over every FPGA image "
                  "assignment", sched::to_string(objective.objective), objective.min_throughput_per_s,
                  fastest < sched::kInf ? 1.0 / fastest : 0.0);
    throw sched::InfeasibleError(buf);
  }
  const ImageChoice& choice = *chosen;
  out.plan = choice.plan;
  out.plan.objective = sched::to_string(objective.objective);
  out.assignment = choice.index;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s; %d FPGA reload%s (%.3g s pause) amortised over %g requests",
                describe(images_, assignments_[choice.index]).c_str(), choice.cost.reloads,
                choice.cost.reloads == 1 ? "" : "s", choice.cost.pause_s, spec_.reload_horizon);
  out.image_note = buf;
  return out;
}

}  // namespace dype::rt
