#pragma once
// The models a daemon serves from model repositories (runtime/repository/): every model folder is
// loaded with its trained weights; one that cannot be loaded is reported (its name and the file,
// tensor or key at fault) and left out, and the others still serve.
//
//   auto loaded = daemon::repository_models({"models"});
//   for (const auto& f : loaded.failures) spdlog::error("{}", f);
//   options.models = loaded.models;
#include <string>
#include <vector>

#include "runtime/daemon/engine_service.h"
#include "runtime/repository/model_repository.h"

namespace dype::rt::daemon {

struct RepositoryLoad {
  std::vector<ServedModel> models;
  std::vector<std::string> failures;  // "model 'x' not served: <what is wrong>"
};

// InputError when a root is not a folder or a model name is in two roots (nothing can be served
// safely then); per-model problems go to `failures`.
// `only`: the model names to load (empty: every model of the repositories); a name that is not in
// them is a failure.
RepositoryLoad repository_models(const std::vector<std::string>& roots, const std::vector<std::string>& only = {});

// A loaded repository model as the service serves it (first plan for a mid-size graph at the
// model's own feature width; requests re-plan it as their characteristics arrive).
ServedModel served_model(const RepositoryModel& m);

}  // namespace dype::rt::daemon
