#pragma once
// Refined performance models kept across restarts. Each served model refines its own copy of the
// fitted models online (runtime/planning/perf_planner.h); dype-serve --state-dir saves those copies at
// shutdown and every few minutes to DIR/refined/<model>.json, one file per model written
// atomically, with the host they were refined on. At start they replace the fitted models they
// refine, so a restarted daemon plans with what it had learnt:
//   - a file for another fit (the fitted model was profiled again since) is ignored, with a note;
//   - a file refined on another host is used with lowered trust (perf::Refinement::lower_trust:
//     the correction kept as a prior, the shape history dropped), with a warning;
//   - a damaged file is ignored with a warning: refinements are an optimisation, never a reason
//     not to serve.
#include <string>
#include <vector>

#include "perfmodel/model_store.h"

namespace dype::rt::daemon {

class RefinedModelsDir {
 public:
  // Creates DIR/refined when missing; InputError naming it when it cannot be made.
  explicit RefinedModelsDir(const std::string& state_dir);
  const std::string& dir() const { return dir_; }

  // The file of `model` (its name with characters outside [A-Za-z0-9_.-] escaped).
  std::string path_of(const std::string& model) const;
  // `base` with each store replaced by its saved refinement where one applies; a line per
  // decision in `notes` ("gcn: amd-mi210 refinement restored (412 updates)", warnings included).
  std::vector<perf::ModelStore> load(const std::string& model, std::vector<perf::ModelStore> base,
                                     std::vector<std::string>& notes) const;
  void save(const std::string& model, const std::vector<perf::ModelStore>& stores) const;

 private:
  std::string dir_;
};

// This machine's host name ("unknown" when it has none).
std::string this_host_name();

}  // namespace dype::rt::daemon
