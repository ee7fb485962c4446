#include "runtime/planning/image_choice.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>

#include "common/error.h"
#include "scheduler/solver.h"

namespace dype::rt {

FpgaImages candidate_images(const hw::SystemConfig& cfg) {
  FpgaImages out;
  std::set<std::string> folders;
  for (const hw::DeviceConfig& d : cfg.devices) {
    if (d.kind != hw::DeviceKind::fpga || !d.schedulable) continue;
    const std::string board = d.profile ? d.profile->id : "";
    if (out.devices > 0 && board != out.board) return {};  // mixed boards: not handled here
    out.board = board;
    ++out.devices;
    if (!d.bitstream) continue;
    folders.insert(std::filesystem::path(d.bitstream_file).parent_path().string());
    auto it = std::find_if(out.options.begin(), out.options.end(),
                           [&](const ImageOption& o) { return o.bitstream.name == d.bitstream->name; });
    if (it == out.options.end()) out.options.push_back({*d.bitstream, 1});
    else ++it->loaded;
  }
  if (out.options.empty()) return {};
  add_manifests_in(folders, out);
  return out;
}

void add_manifests_in(const std::set<std::string>& folders, FpgaImages& images) {
  std::vector<ImageOption> others;
  for (const std::string& folder : folders) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(folder, ec))
      if (e.path().extension() == ".yaml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      hw::Bitstream b;
      try {
        b = hw::load_bitstream(f.string());
      } catch (const Error&) {
        continue;  // not a manifest (or a broken one): not a candidate
      }
      if (b.profile_id != images.board) continue;
      const auto same = [&](const ImageOption& o) { return o.bitstream.name == b.name; };
      if (std::any_of(images.options.begin(), images.options.end(), same) ||
          std::any_of(others.begin(), others.end(), same))
        continue;
      others.push_back({std::move(b), 0});
    }
  }
  std::sort(others.begin(), others.end(),
            [](const ImageOption& a, const ImageOption& b) { return a.bitstream.name < b.bitstream.name; });
  for (auto& o : others) images.options.push_back(std::move(o));
}

std::vector<ImageAssignment> image_assignments(const FpgaImages& images) {
  std::vector<ImageAssignment> out;
  const int n = static_cast<int>(images.options.size());
  if (n == 0) return out;
  ImageAssignment a(static_cast<std::size_t>(n), 0);
  std::function<void(int, int)> rec = [&](int i, int left) {
    if (i == n - 1) {
      a[static_cast<std::size_t>(i)] = left;
      out.push_back(a);
      return;
    }
    for (int c = left; c >= 0; --c) {
      a[static_cast<std::size_t>(i)] = c;
      rec(i + 1, left - c);
    }
  };
  rec(0, images.devices);
  return out;
}

ReloadCost reload_cost(const FpgaImages& images, const ImageAssignment& a) {
  ReloadCost c;
  for (std::size_t i = 0; i < images.options.size(); ++i) {
    const int r = std::max(0, a[i] - images.options[i].loaded);
    if (r == 0) continue;
    c.reloads += r;
    c.pause_s = std::max(c.pause_s, images.options[i].bitstream.load_time_s);
    c.device_seconds += r * images.options[i].bitstream.load_time_s;
  }
  return c;
}

double reload_penalty(const ReloadCost& cost, double horizon, double p_exec_w, sched::Objective objective) {
  // A reload's pause holds requests up once: spread over the horizon, for the period as for the
  // latency.
  if (objective == sched::Objective::perf || objective == sched::Objective::latency) return cost.pause_s / horizon;
  return cost.device_seconds * p_exec_w / horizon;
}

double amortised_score(const sched::Plan& plan, const ReloadCost& cost, double horizon, double p_exec_w,
                       sched::Objective objective) {
  const double own = objective == sched::Objective::perf      ? plan.period_s
                     : objective == sched::Objective::latency ? plan.latency_s
                                                              : plan.energy_j;
  return own + reload_penalty(cost, horizon, p_exec_w, objective);
}

ImageChoice choose_images(const FpgaImages& images, const std::vector<ImageAssignment>& assignments,
                          const std::function<sched::Plan(std::size_t)>& plan_for, double horizon, double p_exec_w,
                          sched::Objective objective) {
  return choose_images(
      images, assignments, [&](std::size_t i, double) { return std::optional<sched::Plan>(plan_for(i)); }, horizon,
      p_exec_w, objective);
}

ImageChoice choose_images(const FpgaImages& images, const std::vector<ImageAssignment>& assignments,
                          const std::function<std::optional<sched::Plan>(std::size_t, double)>& plan_for,
                          double horizon, double p_exec_w, sched::Objective objective) {
  std::optional<ImageChoice> best;
  std::optional<sched::InfeasibleError> error;
  for (std::size_t i = 0; i < assignments.size(); ++i) {
    ImageChoice c;
    c.index = i;
    c.cost = reload_cost(images, assignments[i]);
    // What i's plan must score to win (the test below): under the best's amortised score, or up
    // to it on a tie when i reloads fewer FPGAs.
    double limit = sched::kInf;
    if (best) {
      const double tol = 1e-12 * best->score;
      limit = (c.cost.reloads < best->cost.reloads ? best->score + tol : best->score - tol) -
              reload_penalty(c.cost, horizon, p_exec_w, objective);
    }
    try {
      std::optional<sched::Plan> plan = plan_for(i, limit);
      if (!plan) continue;  // nothing within the limit: cannot win
      c.plan = std::move(*plan);
    } catch (const sched::InfeasibleError& e) {
      if (!error) error = e;
      continue;
    }
    c.score = amortised_score(c.plan, c.cost, horizon, p_exec_w, objective);
    const double tol = best ? 1e-12 * best->score : 0.0;
    if (!best || c.score < best->score - tol || (c.score <= best->score + tol && c.cost.reloads < best->cost.reloads))
      best = std::move(c);
  }
  if (!best) {
    if (error) throw *error;
    throw sched::InfeasibleError("no image assignment gives a plan");
  }
  return std::move(*best);
}

ImageChoice choose_images_for(const FpgaImages& images, const std::vector<ImageAssignment>& assignments,
                              const AssignmentSolve& solve, const sched::ObjectiveSpec& objective, double horizon,
                              double p_exec_w) {
  sched::ObjectiveSpec each = objective;
  if (objective.objective == sched::Objective::balanced) {
    double fastest = sched::kInf;
    for (std::size_t i = 0; i < assignments.size(); ++i) {
      try {
        if (const auto p = solve(i, {.objective = sched::Objective::perf}, fastest))
          fastest = std::min(fastest, p->period_s);
      } catch (const sched::InfeasibleError&) {
      }
    }
    each = {.objective = sched::Objective::qos, .balance_ratio = objective.balance_ratio,
            .min_throughput_per_s = objective.balance_ratio / fastest};
  }
  return choose_images(
      images, assignments, [&](std::size_t i, double score_limit) { return solve(i, each, score_limit); }, horizon,
      p_exec_w, objective.objective);
}

std::string describe(const FpgaImages& images, const ImageAssignment& a) {
  std::string s;
  for (std::size_t i = 0; i < images.options.size(); ++i) {
    if (a[i] == 0) continue;
    s += (s.empty() ? "" : " + ") + std::to_string(a[i]) + " x " + images.options[i].bitstream.name;
  }
  return s;
}

}  // namespace dype::rt
