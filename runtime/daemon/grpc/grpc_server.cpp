#include "runtime/daemon/grpc/grpc_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <set>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "runtime/daemon/grpc/grpc_admin.h"
#include "runtime/daemon/grpc/grpc_graphs.h"
#include "runtime/daemon/grpc/grpc_inference_service.h"
#include "runtime/daemon/proto/dype_admin.grpc.pb.h"
#include "runtime/daemon/proto/dype_graphs.grpc.pb.h"

namespace dype::rt::daemon {
namespace {

// What lies at `path`: nothing (nullopt), a socket (true) or anything else (false).
std::optional<bool> socket_at(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return std::nullopt;
  return S_ISSOCK(st.st_mode);
}

}  // namespace

GrpcServer::GrpcServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics,
                       AdmissionControl& admission, std::string host, int port,
                       std::size_t max_message_bytes, AdminApi* admin)
    : impl_(std::make_unique<GrpcInferenceService>(service, graphs, metrics, admission, admin)),
      admin_(admin ? make_grpc_admin_service(*admin) : nullptr),
      graph_service_(make_grpc_graph_service(*impl_)),
      host_(std::move(host)),
      requested_port_(port),
      max_message_bytes_(max_message_bytes) {
  std::set<std::string> names;
  for (const ModelInfo& m : service.models()) names.insert(m.name);
  metrics.set_served(names);
}

GrpcServer::~GrpcServer() {
  stop(0.0);
}

void GrpcServer::set_infer_token(std::string token) {
  impl_->infer_token = std::move(token);
}
void GrpcServer::set_max_streams(std::size_t n) {
  impl_->max_streams = n;
}
void GrpcServer::set_max_workers(std::size_t n) {
  impl_->max_workers = std::max<std::size_t>(1, n);
}
void GrpcServer::set_shared_memory(SharedMemoryRegistry* registry) { impl_->shm = registry; }
void GrpcServer::set_tls(TlsIdentity identity) {
  tls_ = std::move(identity);
}
void GrpcServer::set_unix_socket(std::string path) {
  unix_socket_ = std::move(path);
}
std::size_t GrpcServer::streams_open() const {
  return impl_->streams_open();
}

void GrpcServer::start() {
  // grpc.health.v1.Health (Kubernetes' gRPC probes): SERVING while ready, NOT_SERVING from the
  // start of shutdown (set_serving).
  grpc::EnableDefaultHealthCheckService(true);
  if (!impl_->pool) impl_->pool = std::make_unique<WorkerPool>(2, impl_->max_workers);
  grpc::ServerBuilder b;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls_) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({tls_->private_key_pem, tls_->cert_chain_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  if (requested_port_ >= 0)
    b.AddListeningPort(host_ + ":" + std::to_string(requested_port_), credentials, &port_);
  if (!unix_socket_.empty()) {
    // gRPC would unlink a stale socket itself; anything else at the path is refused, not replaced.
    if (socket_at(unix_socket_) == false)
      throw Error("cannot serve gRPC on the socket " + unix_socket_ +
                  ": a file that is not a socket is there");
    b.AddListeningPort("unix:" + unix_socket_, credentials);
  }
  b.RegisterService(impl_.get());
  if (admin_) b.RegisterService(admin_.get());
  b.RegisterService(graph_service_.get());
  b.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<std::size_t>(max_message_bytes_, INT32_MAX)));
  b.SetMaxSendMessageSize(INT32_MAX);
  impl_->server = b.BuildAndStart();
  if (!impl_->server || (requested_port_ >= 0 && port_ <= 0))
    throw Error("cannot listen for gRPC on " + host_ + ":" + std::to_string(requested_port_) +
                (unix_socket_.empty() ? "" : " and unix:" + unix_socket_));
  if (auto* health = impl_->server->GetHealthCheckService()) {
    // Named services are known to the health service once given a status.
    health->SetServingStatus(pb::GRPCInferenceService::service_full_name(), true);
    if (admin_) health->SetServingStatus(dype::admin::DypeAdmin::service_full_name(), true);
    health->SetServingStatus(dype::graphs::DypeGraphs::service_full_name(), true);
  }
  set_serving(true);
}

void GrpcServer::set_serving(bool serving) {
  if (!impl_ || !impl_->server) return;
  if (auto* health = impl_->server->GetHealthCheckService()) {
    health->SetServingStatus(serving);  // the server ("") and every service by name
  }
}

void GrpcServer::stop(double deadline_s) {
  if (!impl_ || !impl_->server) return;
  set_serving(false);
  impl_->begin_stop();  // idle streams end now, without waiting for the deadline
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(deadline_s)));
  impl_->server->Wait();
  impl_->wait_streams_closed(5.0);  // their OnDone, which follows the call's end
  impl_->server.reset();
  if (!unix_socket_.empty() && socket_at(unix_socket_) == true) ::unlink(unix_socket_.c_str());
}

}  // namespace dype::rt::daemon