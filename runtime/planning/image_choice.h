#pragma once
// Image-aware planning: which FPGA image (bitstream) to load on each FPGA. The candidates are the
// manifests in the folder of the images the system file loads, built for the same board
// (configs/bitstreams/*.yaml, `device_model`). An assignment gives each image a number of FPGAs
// (the FPGAs are alike, so counts are enough); each assignment is a system whose FPGA kind is
// split into one kind per image (`fpga:<image>`, letter F), solved as usual, and the best plan over
// all assignments wins once every FPGA it must reload has paid for itself:
//   reloads  = sum over images of max(0, FPGAs given the image - FPGAs that have it loaded),
//   pause    = the longest load_time_s among the reloaded images (they reload in parallel),
//   perf:      period + pause / horizon,   energy: energy + sum(reloads x load_time x p_exec) / horizon,
// with `horizon` the requests a plan is expected to serve (dype-schedule --reload-horizon).
// Every assignment is tried, so the choice is exact for this amortised objective: a plan that
// leaves an FPGA unused is also found in the assignment where that FPGA keeps its image.
// Everything here is modelled.
//
//   const auto images = rt::candidate_images(cfg);         // 2 images for 3 U280s: 4 assignments
//   for (const auto& a : rt::image_assignments(images)) { ... load_schedule_inputs(..., &a) ... }
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hw/device_profile.h"
#include "hw/system_config.h"
#include "scheduler/plan.h"

namespace dype::rt {

struct ImageOption {
  hw::Bitstream bitstream;
  int loaded = 0;  // FPGAs that have it loaded now
};

struct FpgaImages {
  std::vector<ImageOption> options;  // the loaded images first, then the others by name
  int devices = 0;                   // schedulable FPGAs (all of one board)
  std::string board;                 // their device model id
};

// The candidates for the system's schedulable FPGAs; no options when there are none, when the
// FPGAs are of different boards, or when none has an image loaded (nowhere to look).
FpgaImages candidate_images(const hw::SystemConfig& cfg);

// Appends the manifests in `folders` built for images.board that are not options yet, by name.
void add_manifests_in(const std::set<std::string>& folders, FpgaImages& images);

// FPGAs per image, one entry per option, summing to images.devices; every assignment.
using ImageAssignment = std::vector<int>;
std::vector<ImageAssignment> image_assignments(const FpgaImages& images);

// What an assignment costs to reach from the loaded images (see above).
struct ReloadCost {
  int reloads = 0;
  double pause_s = 0.0;          // the pipeline's stop while the FPGAs reload
  double device_seconds = 0.0;   // sum of the reloads' load times
};
ReloadCost reload_cost(const FpgaImages& images, const ImageAssignment& a);

// The plan's objective score with the reload amortised over `horizon` requests (p_exec_w: an
// FPGA's power while it reconfigures): its own score plus reload_penalty().
double amortised_score(const sched::Plan& plan, const ReloadCost& cost, double horizon, double p_exec_w,
                       sched::Objective objective);
double reload_penalty(const ReloadCost& cost, double horizon, double p_exec_w, sched::Objective objective);

// The assignment whose plan has the best amortised score; on a tie, the one with fewer reloads.
// plan_for(i): the plan for assignment i, InfeasibleError when it has none (the first such error
// is rethrown when no assignment has a plan).
struct ImageChoice {
  std::size_t index = 0;
  sched::Plan plan;
  ReloadCost cost;
  double score = 0.0;
};
ImageChoice choose_images(const FpgaImages& images, const std::vector<ImageAssignment>& assignments,
                          const std::function<sched::Plan(std::size_t)>& plan_for, double horizon, double p_exec_w,
                          sched::Objective objective);
// The same, telling plan_for(i, score_limit) what assignment i's plan must score at most (its own
// score, before the reload is added) to win against the best assignment so far: kInf for the
// first, then the best's amortised score less i's reload penalty (ties within 1e-12 go to fewer
// reloads, as above). plan_for may return nullopt when no plan of assignment i scores at most the
// limit (sched::solve_shapes' score_limit), and need not solve that assignment in full; the
// choice is the one above whenever every plan it returns is the plan without the limit or one
// scoring above the limit.
ImageChoice choose_images(const FpgaImages& images, const std::vector<ImageAssignment>& assignments,
                          const std::function<std::optional<sched::Plan>(std::size_t, double)>& plan_for,
                          double horizon, double p_exec_w, sched::Objective objective);

// DyPe's choice for `objective` over every assignment, as dype-schedule and dype-eval make it
// (PlanningCase): balanced holds every assignment to the fastest period over all of them (a qos
// solve with that throughput floor; only the fastest period counts, so each perf solve is held to
// the fastest so far), then choose_images() above ranks the objective's amortised score.
// solve(i, objective, score_limit): assignment i's plan, as plan_for above.
using AssignmentSolve =
    std::function<std::optional<sched::Plan>(std::size_t, const sched::ObjectiveSpec&, double score_limit)>;
ImageChoice choose_images_for(const FpgaImages& images, const std::vector<ImageAssignment>& assignments,
                              const AssignmentSolve& solve, const sched::ObjectiveSpec& objective, double horizon,
                              double p_exec_w);

// "2 x u280-sextans-gemm + 1 x u280-sextans-swat".
std::string describe(const FpgaImages& images, const ImageAssignment& a);

}  // namespace dype::rt
