#include "runtime/daemon/grpc/grpc_repository.h"

#include <optional>
#include <string>

#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc/grpc_codec.h"

namespace dype::rt::daemon {

namespace {

namespace pb = inference;

// Authorises the call, runs `f` and maps any exception through the daemon's one error table.
template <typename F>
grpc::Status guarded(AdminApi* admin, const grpc::ServerContext& ctx, F&& f) {
  try {
    if (!admin) throw NotSupported("the model repository API needs an admin token (--admin-token-file)");
    admin->authorize(metadata_value(ctx, "authorization"));
    f(*admin);
    return grpc::Status::OK;
  } catch (...) {
    ErrorAnswer a = answer_for(std::current_exception());
    return {a.grpc_code, std::move(a.message)};
  }
}

void only_repository(const std::string& name) {
  // One repository set per server: a repository name other than empty names nothing here.
  if (!name.empty()) throw InputError("repository_name", "'" + name + "' is not known (leave it empty)");
}

}  // namespace

grpc::Status repository_index(AdminApi* admin, const grpc::ServerContext& ctx, const pb::RepositoryIndexRequest& q,
                              pb::RepositoryIndexResponse& r) {
  return guarded(admin, ctx, [&](AdminApi& api) {
    only_repository(q.repository_name());
    for (const nlohmann::json& m : api.repository_index()) {
      if (q.ready() && m.value("state", "") != "READY") continue;
      auto* e = r.add_models();
      e->set_name(m.value("name", ""));
      e->set_version(m.value("version", ""));
      e->set_state(m.value("state", ""));
      e->set_reason(m.value("reason", ""));
    }
  });
}

grpc::Status repository_load(AdminApi* admin, const grpc::ServerContext& ctx, const pb::RepositoryModelLoadRequest& q) {
  return guarded(admin, ctx, [&](AdminApi& api) {
    only_repository(q.repository_name());
    std::optional<std::string> config;
    for (const auto& [k, v] : q.parameters()) {
      if (k != "config") throw InputError("parameters." + k, "unknown (known: config)");
      if (v.parameter_choice_case() != pb::ModelRepositoryParameter::kStringParam)
        throw InputError("parameters.config", "must be the config.yaml text as a string_param");
      config = v.string_param();
    }
    api.load_model(q.model_name(), config);
  });
}

grpc::Status repository_unload(AdminApi* admin, const grpc::ServerContext& ctx,
                               const pb::RepositoryModelUnloadRequest& q) {
  return guarded(admin, ctx, [&](AdminApi& api) {
    only_repository(q.repository_name());
    if (!q.parameters().empty()) throw InputError("parameters", "none are known for unload");
    api.unload_model(q.model_name());
  });
}

}  // namespace dype::rt::daemon
