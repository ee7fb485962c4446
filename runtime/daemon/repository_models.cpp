#include "runtime/daemon/repository_models.h"

#include <algorithm>

#include "common/error.h"

namespace dype::rt::daemon {

RepositoryLoad repository_models(const std::vector<std::string>& roots, const std::vector<std::string>& only) {
  const ModelRepository repo(roots);
  RepositoryLoad out;
  const std::vector<std::string> all = repo.index();
  for (const std::string& name : only) {
    if (std::find(all.begin(), all.end(), name) == all.end())
      out.failures.push_back("model '" + name + "' not served: not in the model repository");
  }
  for (const std::string& name : all) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    try {
      out.models.push_back(served_model(repo.load(name)));
    } catch (const Error& e) {
      out.failures.push_back("model '" + name + "' not served: " + e.what());
    }
  }
  return out;
}

ServedModel served_model(const RepositoryModel& m) {
  ServedModel s;
  s.name = m.name;
  s.spec = m.model->spec();
  s.model = m.model;
  s.version = m.version;
  s.fingerprint = m.fingerprint;
  s.batching = m.config.dynamic_batching;
  s.plan_for = {.nodes = 4096, .nnz = 40960, .feature_len = m.model->spec().in_features, .degree_skew = 1.0};
  return s;
}

}  // namespace dype::rt::daemon
