#include "runtime/daemon/grpc/grpc_admin.h"

#include <optional>

#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/proto/dype_admin.grpc.pb.h"

namespace dype::rt::daemon {
namespace {

struct GrpcAdminService final : public dype::admin::DypeAdmin::Service {
  AdminApi& api;
  explicit GrpcAdminService(AdminApi& a) : api(a) {}

  template <typename F>
  grpc::Status run(grpc::ServerContext* ctx, dype::admin::AdminResponse* r, F&& f) {
    std::string reason;
    try {
      api.authorize(metadata_value(*ctx, "authorization"));
      r->set_json(
          f().dump(-1, ' ', false,
                   nlohmann::json::error_handler_t::replace));  // invalid UTF-8 echoed back is
                                                                // replaced, not a 316 throw
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
  }
  static std::optional<std::string> opt(const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  }
  using Req = dype::admin::AdminRequest;
  using Resp = dype::admin::AdminResponse;
  grpc::Status Plan(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.plan(opt(q->model())); });
  }
  grpc::Status SetMode(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.set_mode(q->mode()); });
  }
  grpc::Status Pareto(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.pareto(opt(q->model())); });
  }
  grpc::Status Devices(grpc::ServerContext* c, const Req*, Resp* r) override {
    return run(c, r, [&] { return api.devices(); });
  }
  grpc::Status DrainDevice(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_device(q->device(), true); });
  }
  grpc::Status UndrainDevice(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_device(q->device(), false); });
  }
  grpc::Status LoadBitstream(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.load_bitstream(q->device(), q->path()); });
  }
  grpc::Status UnloadBitstream(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.unload_bitstream(q->device()); });
  }
  grpc::Status Hosts(grpc::ServerContext* c, const Req*, Resp* r) override {
    return run(c, r, [&] { return api.hosts(); });
  }
  grpc::Status DrainHost(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_host(q->host(), true); });
  }
  grpc::Status UndrainHost(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_host(q->host(), false); });
  }
  grpc::Status JoinHost(grpc::ServerContext* ctx, const dype::admin::JoinRequest* q,
                        Resp* r) override {
    std::string reason;
    try {
      const std::string auth = metadata_value(*ctx, "authorization");
      nlohmann::json devices = nlohmann::json::array();
      for (const auto& d : q->devices())
        devices.push_back({{"name", d.name()},
                           {"kind", d.kind()},
                           {"product", d.product()},
                           {"bitstream", d.bitstream()},
                           {"model", d.model()}});
      r->set_json(api.join_host(auth, q->host(), q->address(), devices)
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
  }
  grpc::Status ChooseImages(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] {
      return api.choose_images(
          opt(q->model()), q->horizon() == 0 ? std::nullopt : std::optional<double>(q->horizon()),
          q->apply());
    });
  }
};

}  // namespace

std::unique_ptr<grpc::Service> make_grpc_admin_service(AdminApi& api) {
  return std::make_unique<GrpcAdminService>(api);
}

}  // namespace dype::rt::daemon
