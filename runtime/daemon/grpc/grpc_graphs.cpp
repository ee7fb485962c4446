#include "runtime/daemon/grpc/grpc_graphs.h"

#include "runtime/daemon/errors.h"
#include "runtime/daemon/graph_api.h"
#include "runtime/daemon/grpc/grpc_inference_service.h"
#include "runtime/daemon/proto/dype_graphs.grpc.pb.h"

namespace dype::rt::daemon {
namespace {

namespace gpb = dype::graphs;
using nlohmann::json;

class GrpcGraphService final : public gpb::DypeGraphs::Service {
 public:
  explicit GrpcGraphService(GrpcInferenceService& s) : s_(s) {}

  grpc::Status Register(grpc::ServerContext* c, const pb::ModelInferRequest* q, gpb::GraphResponse* r) override {
    return call(*c, r, [&](const GraphOwner& o) { return register_graph(s_.graphs, from_proto(*q), o); });
  }

  grpc::Status Update(grpc::ServerContext* c, const gpb::GraphUpdateRequest* q, gpb::GraphResponse* r) override {
    return call(*c, r, [&](const GraphOwner& o) { return update_graph(s_.graphs, q->graph_id(), from_proto(q->tensors()), o); });
  }

  grpc::Status Delete(grpc::ServerContext* c, const gpb::GraphUpdateRequest* q, gpb::GraphResponse* r) override {
    return call(*c, r, [&](const GraphOwner& o) {
      if (!s_.graphs.remove(q->graph_id(), &o))
        throw NotFound("unknown graph id '" + q->graph_id() + "' (or registered by another owner)");
      return json{{"deleted", q->graph_id()}};
    });
  }

  grpc::Status UpdateStream(grpc::ServerContext* c,
                            grpc::ServerReaderWriter<gpb::GraphResponse, gpb::GraphUpdateRequest>* stream) override {
    if (grpc::Status st = s_.check_token(*c); !st.ok()) return st;
    const GraphOwner owner = GrpcInferenceService::graph_owner(*c);
    gpb::GraphUpdateRequest q;
    while (stream->Read(&q)) {
      gpb::GraphResponse r;
      try {
        s_.admission.check_serving();
        r.set_json(update_graph(s_.graphs, q.graph_id(), from_proto(q.tensors()), owner).dump());
      } catch (...) {
        std::string reason;
        r.set_error_message(status_of(std::current_exception(), reason).error_message());
      }
      if (!stream->Write(r)) break;  // the client went away
    }
    return grpc::Status::OK;
  }

 private:
  // The token and admission checks, then f(owner); its exception as the status.
  template <typename F>
  grpc::Status call(grpc::ServerContext& c, gpb::GraphResponse* r, F&& f) {
    if (grpc::Status st = s_.check_token(c); !st.ok()) return st;
    std::string reason;
    try {
      s_.admission.check_serving();
      r->set_json(f(GrpcInferenceService::graph_owner(c)).dump());
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
  }

  GrpcInferenceService& s_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_grpc_graph_service(GrpcInferenceService& inference) {
  return std::make_unique<GrpcGraphService>(inference);
}

}  // namespace dype::rt::daemon
