#pragma once
// The gRPC front end: inference.GRPCInferenceService (KServe v2 / Triton) with ServerLive,
// ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer and Triton's bidirectional
// ModelStreamInfer (requests are submitted as they arrive and answered in order, one response
// each; a bad request gets a response with error_message and the stream goes on). Shares the
// admission queue and shutdown switch with the HTTP front end.
//
// Threads: the infer RPCs use gRPC's callback API. A stream is a reactor that holds no thread
// while idle; building and submitting requests and waiting for the engine's answers run on a
// bounded WorkerPool (worker_pool.h: 2 threads idle, up to set_max_workers busy), never on gRPC's
// callback threads. At most set_max_streams streams are open at once (RESOURCE_EXHAUSTED beyond). With an AdminApi it also serves
// dype.admin.DypeAdmin (runtime/daemon/proto/dype_admin.proto), the HTTP admin API's twin.
//
//   GrpcServer grpc(service, graphs, metrics, http.admission(), "127.0.0.1", 0);
//   grpc.start();  ... grpc.port() ...  grpc.stop();
#include <memory>
#include <optional>
#include <string>

#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/admission.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/metrics.h"
#include "runtime/daemon/service.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/daemon/http/tls.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace dype::rt::daemon {

struct GrpcInferenceService;
class SharedMemoryRegistry;

class GrpcServer {
 public:
  GrpcServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, AdmissionControl& admission,
             std::string host, int port, std::size_t max_message_bytes = 256u << 20, AdminApi* admin = nullptr);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds (Error naming host:port, or the socket, when it cannot) and serves on gRPC's own threads.
  void start();
  int port() const { return port_; }
  // Refuses new calls, ends idle streams at once (UNAVAILABLE) and streams with requests in
  // flight once those are answered; cancels what is left after `deadline_s` and stops.
  void stop(double deadline_s = 5.0);
  // grpc.health.v1.Health's answer for the server and each of its services: SERVING after start,
  // NOT_SERVING once shutdown begins.
  void set_serving(bool serving);
  // Before start(): ModelInfer and ModelStreamInfer then need "authorization: Bearer <token>"
  // metadata (UNAUTHENTICATED otherwise); empty: open.
  void set_infer_token(std::string token);
  // Before start(): ModelStreamInfer streams open at once (default 4096); more are refused with
  // RESOURCE_EXHAUSTED naming the limit.
  void set_max_streams(std::size_t streams);
  // Before start(): the WorkerPool's bound on threads that build, submit and wait for requests
  // (default 64, the default admission queue: every blocked worker holds an admitted request).
  void set_max_workers(std::size_t threads);
  // Before start(): serve over TLS (grpc::SslServerCredentials with this certificate and key; no
  // client certificate asked for) instead of plain text.
  void set_tls(TlsIdentity identity);
  // Before start(): the shared-memory regions requests may name (the HTTP server's, so both front
  // ends share them); none: requests naming shared memory are refused.
  void set_shared_memory(SharedMemoryRegistry* registry);
  // Before start(): also serve on a Unix-domain socket at `path` (gRPC target "unix:PATH"; a stale
  // socket file there is replaced, and the file is removed on stop). Same-host clients skip the TCP
  // stack: a 35 MB tensor crosses about twice as fast as over TCP loopback. With port -1, the
  // socket is the only listener. Access is the socket file's permissions (the process umask) and
  // the infer token, as for the TCP port.
  void set_unix_socket(std::string path);
  const std::string& unix_socket() const { return unix_socket_; }
  // ModelStreamInfer streams open now.
  std::size_t streams_open() const;

 private:
  std::unique_ptr<GrpcInferenceService> impl_;  // grpc_inference_service.h
  std::unique_ptr<grpc::Service> admin_;         // grpc_admin.h
  std::unique_ptr<grpc::Service> graph_service_;  // grpc_graphs.h
  std::string host_;
  std::string unix_socket_;
  int requested_port_;
  int port_ = -1;
  std::size_t max_message_bytes_;
  std::optional<TlsIdentity> tls_;
};

}  // namespace dype::rt::daemon
