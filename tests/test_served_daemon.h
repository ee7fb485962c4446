// An EngineService behind its real HTTP and gRPC front ends on ephemeral local ports, for tests that
// talk to the daemon with real clients (httplib, grpc++ stubs).
//
//   test::ServedDaemon d(options);                  // serving
//   httplib::Client c("127.0.0.1", d.http->http_port());
#pragma once

#include <memory>

#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"

namespace dype::test {

struct ServedDaemon {
  std::unique_ptr<rt::daemon::EngineService> service;
  rt::daemon::GraphRegistry graphs;
  rt::daemon::Metrics metrics;
  std::unique_ptr<rt::daemon::HttpServer> http;
  std::unique_ptr<rt::daemon::GrpcServer> grpc;

  explicit ServedDaemon(rt::daemon::EngineServiceOptions options, bool allow_client_shm = false,
                        rt::daemon::GraphRegistryLimits graph_limits = {})
      : graphs(graph_limits) {
    service = std::make_unique<rt::daemon::EngineService>(std::move(options));
    rt::daemon::ServerOptions so;
    so.host = "127.0.0.1";
    so.http_port = 0;
    so.metrics_port = 0;  // ephemeral, as the HTTP port
    so.allow_client_shm = allow_client_shm;
    http = std::make_unique<rt::daemon::HttpServer>(*service, graphs, metrics, so);
    http->start();
    grpc = std::make_unique<rt::daemon::GrpcServer>(*service, graphs, metrics, http->admission(), "127.0.0.1", 0,
                                                    64u << 20, nullptr);
    grpc->set_shared_memory(&http->shared_memory());
    grpc->start();
  }
  ~ServedDaemon() {
    grpc->stop(1.0);
    http->stop();
  }
  ServedDaemon(const ServedDaemon&) = delete;
  ServedDaemon& operator=(const ServedDaemon&) = delete;
};

}  // namespace dype::test
