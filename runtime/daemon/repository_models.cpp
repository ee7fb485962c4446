#include "runtime/daemon/repository_models.h"

#include "kernels/error.h"
#include "runtime/repository/model_repository.h"

namespace dype::rt::daemon {

RepositoryLoad repository_models(const std::vector<std::string>& roots) {
  const ModelRepository repo(roots);
  RepositoryLoad out;
  for (const std::string& name : repo.index()) {
    try {
      RepositoryModel m = repo.load(name);
      ServedModel s;
      s.name = name;
      s.spec = m.model->spec();
      s.model = m.model;
      s.version = m.version;
      // The first plan is made for a mid-size graph at the model's own feature width; requests
      // re-plan it as their characteristics arrive.
      s.plan_for = {.nodes = 4096, .nnz = 40960, .feature_len = m.model->spec().in_features, .degree_skew = 1.0};
      out.models.push_back(std::move(s));
    } catch (const Error& e) {
      out.failures.push_back("model '" + name + "' not served: " + e.what());
    }
  }
  return out;
}

}  // namespace dype::rt::daemon
