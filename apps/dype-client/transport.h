#pragma once
// How dype-client reaches dype-serve: the Open Inference Protocol over HTTP (binary tensor
// extension, keep-alive) or over gRPC (inference.GRPCInferenceService: unary ModelInfer, or one
// Triton ModelStreamInfer stream per transport with one request in flight). Graph registration is
// the daemon's HTTP extension (POST/DELETE /v2/dype/graphs), so it always goes over HTTP.
//
// A transport is used by one thread at a time; stream workers each make their own.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/edge_list.h"
#include "runtime/daemon/kserve/tensor.h"

namespace httplib {
class Client;
enum class Error;
}

namespace dype::client {

struct Endpoint {
  std::string host = "127.0.0.1";
  int http_port = 8000;
  int grpc_port = 8001;
  // Non-empty: gRPC over this Unix-domain socket (dype-serve --grpc-socket), not the port.
  std::string grpc_socket;
  int metrics_port = 8002;
  std::string token;  // inference token (dype-serve --infer-token-file): sent on infer and graph calls
  std::string graph_owner;  // Dype-Graph-Owner: the registered graphs' owner key ("" = this address)
  // TLS (dype-serve --tls-cert): HTTPS and gRPC over TLS, the server's certificate checked against
  // `tls_ca_file` (PEM; empty: the system's trusted CAs) and the host name or address. The metrics
  // port stays plain HTTP.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_ca_pem;  // its contents, for gRPC
};

// An HTTP(S) client of the endpoint's `port` with its token, owner key and TLS settings.
std::unique_ptr<httplib::Client> http_client(const Endpoint& endpoint, int port);
// A failed call's cause, with a hint for TLS failures.
std::string http_error(httplib::Error error);

enum class Protocol { http, grpc };

// What the client needs from a model's metadata.
struct ModelInfo {
  bool transformer = false;
  int features = 0;     // columns of input x
  int out_columns = 0;  // columns of output y (0: the model answers no y)
};

class Transport {
 public:
  virtual ~Transport() = default;
  // One inference; throws dype::Error with the server's message (and status) on failure.
  // `outputs`: those asked for (none: every output, in the response); an output in shared memory
  // comes back with its shared_memory set and no bytes.
  virtual rt::daemon::InferResponse infer(const std::string& model, const std::vector<rt::daemon::Tensor>& inputs,
                                          const nlohmann::json& parameters,
                                          const std::vector<rt::daemon::RequestedOutput>& outputs = {}) = 0;
  virtual ModelInfo model_info(const std::string& model) = 0;
  // The system shared-memory extension (dype-serve --allow-client-shm): register a region of the
  // POSIX shared-memory object `key`, and unregister it.
  virtual void register_region(const std::string& name, const std::string& key, std::uint64_t byte_size) = 0;
  virtual void unregister_region(const std::string& name) = 0;
  // The CUDA shared-memory extension: register GPU memory by its serialised cudaIpcMemHandle_t
  // (64 bytes) on CUDA device `device_id`, and unregister it.
  virtual void register_cuda_region(const std::string& name, const std::string& raw_handle,
                                    int device_id, std::uint64_t byte_size) = 0;
  virtual void unregister_cuda_region(const std::string& name) = 0;
};

// The graph as request tensors: edge_index INT64 [2, E], plus edge_weight FP32 [E] when weighted.
std::vector<rt::daemon::Tensor> graph_tensors(const kernels::EdgeList& graph);

// streaming: gRPC only; requests go over one ModelStreamInfer stream instead of unary calls.
std::unique_ptr<Transport> make_transport(Protocol protocol, const Endpoint& endpoint, bool streaming);

// The daemon's graph registry (HTTP): register a graph (edge_index, edge_weight when it has
// weights) once and reference it by parameters.graph_id.
std::string register_graph(const Endpoint& endpoint, const kernels::EdgeList& graph);
// False when the id was unknown (already gone); throws when the server cannot be reached.
bool delete_graph(const Endpoint& endpoint, const std::string& id);
// The caller's registered graphs (GET /v2/dype/graphs: by its owner key, else its address), and
// dropping them all (DELETE /v2/dype/graphs, after a stream stopped with Ctrl-C); the ids dropped.
nlohmann::json list_graphs(const Endpoint& endpoint);
std::vector<std::string> delete_all_graphs(const Endpoint& endpoint);

// Plan epoch of a model from the metrics port (public, no token), -1 when unreachable; `label`
// gets the plan's mnemonic and devices when given.
long plan_epoch(const Endpoint& endpoint, const std::string& model, std::string* label = nullptr);

// The p-quantile (0..1) of latencies measured at the client; 0 when there are none.
double percentile(std::vector<double> v, double p);

}  // namespace dype::client
