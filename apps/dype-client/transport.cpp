#include "transport.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/byte_buffer.h>
#include <httplib.h>
#include <boost/beast/core/detail/base64.hpp>

#include "common/error.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

namespace dype::client {

using json = nlohmann::json;
using rt::daemon::InferResponse;
using rt::daemon::RequestedOutput;
using rt::daemon::Tensor;

std::string http_error(httplib::Error error) {
  std::string s = httplib::to_string(error);
  if (error == httplib::Error::SSLServerVerification)
    s += " (the server's certificate is not signed by a CA this client trusts: see --tls-ca)";
  if (error == httplib::Error::SSLConnection) s += " (TLS handshake failed: does the server serve HTTPS?)";
  return s;
}

std::unique_ptr<httplib::Client> http_client(const Endpoint& e, int port) {
  std::unique_ptr<httplib::Client> c;
  if (e.tls) {
    const bool ipv6 = e.host.find(':') != std::string::npos;
    c = std::make_unique<httplib::Client>("https://" + (ipv6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(port));
    if (!e.tls_ca_file.empty()) c->set_ca_cert_path(e.tls_ca_file.c_str());
    c->enable_server_certificate_verification(true);
  } else {
    c = std::make_unique<httplib::Client>(e.host, port);
  }
  httplib::Headers h;
  if (!e.token.empty()) h.emplace("Authorization", "Bearer " + e.token);
  if (!e.graph_owner.empty()) h.emplace("Dype-Graph-Owner", e.graph_owner);
  c->set_default_headers(std::move(h));
  c->set_read_timeout(300, 0);
  c->set_write_timeout(300, 0);
  return c;
}

namespace {

json get_json(httplib::Client& c, const std::string& path) {
  auto r = c.Get(path.c_str());
  if (!r) throw Error("no response from server: " + http_error(r.error()));
  if (r->status != 200) throw Error("HTTP " + std::to_string(r->status) + ": " + r->body);
  return json::parse(r->body);
}

class HttpTransport final : public Transport {
 public:
  explicit HttpTransport(const Endpoint& e) : c_(http_client(e, e.http_port)) {}

  void post_json(const std::string& path, const json& body) {
    auto r = c_->Post(path.c_str(), body.dump(), "application/json");
    if (!r) throw Error("no response from server: " + http_error(r.error()));
    if (r->status != 200) throw Error("HTTP " + std::to_string(r->status) + ": " + r->body);
  }

  InferResponse infer(const std::string& model, const std::vector<Tensor>& inputs, const json& params,
                      const std::vector<RequestedOutput>& outputs) override {
    const rt::daemon::EncodedBody b = rt::daemon::encode_infer_request(
        "", inputs, params, true, true, outputs, /*inline_binary=*/false);
    // No binary section when every tensor is in shared memory: then the body is plain JSON.
    httplib::Headers h;
    if (b.header_length) h.emplace("Inference-Header-Content-Length", std::to_string(*b.header_length));
    // The body is sent piece by piece, the JSON header and then each binary input straight from its
    // tensor: no copy of a 35 MB x into a body string (and into the request httplib would make).
    std::vector<std::string_view> pieces{b.body};
    std::size_t length = b.body.size();
    for (const Tensor& t : inputs)
      if (!t.shared_memory && !t.bytes().empty()) {
        pieces.push_back(t.bytes());
        length += t.bytes().size();
      }
    auto send = [&pieces](std::size_t offset, std::size_t, httplib::DataSink& sink) {
      constexpr std::size_t kChunk = std::size_t{4} << 20;  // a few socket writes per call
      for (std::string_view p : pieces) {
        if (offset >= p.size()) {
          offset -= p.size();
          continue;
        }
        const std::size_t n = std::min(kChunk, p.size() - offset);
        return sink.write(p.data() + offset, n);
      }
      return false;  // asked past the end: cannot happen with the length given
    };
    auto r = c_->Post(("/v2/models/" + model + "/infer").c_str(), h, length, send,
                      b.content_type.c_str());
    if (!r) throw Error("no response from server: " + http_error(r.error()));
    if (r->status != 200) throw Error("HTTP " + std::to_string(r->status) + ": " + r->body);
    std::optional<std::size_t> hl;
    if (r->has_header("Inference-Header-Content-Length"))
      hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
    return rt::daemon::parse_infer_response(r->body, hl);
  }

  ModelInfo model_info(const std::string& model) override {
    const json m = get_json(*c_, "/v2/models/" + model);
    int out_columns = 0;
    for (const json& o : m.at("outputs"))
      if (o.at("name") == "y") out_columns = o.at("shape").at(1).get<int>();
    return {m.value("platform", "") == "dype_transformer", m.at("inputs").at(0).at("shape").at(1).get<int>(), out_columns};
  }

  void register_region(const std::string& name, const std::string& key, std::uint64_t byte_size) override {
    post_json("/v2/systemsharedmemory/region/" + name + "/register", {{"key", key}, {"offset", 0}, {"byte_size", byte_size}});
  }
  void unregister_region(const std::string& name) override {
    post_json("/v2/systemsharedmemory/region/" + name + "/unregister", json::object());
  }
  void register_cuda_region(const std::string& name, const std::string& raw_handle, int device_id,
                            std::uint64_t byte_size) override {
    // Standard base64 with its padding, as Triton's clients send it.
    namespace b64 = boost::beast::detail::base64;
    std::string text(b64::encoded_size(raw_handle.size()), '\0');
    text.resize(b64::encode(text.data(), raw_handle.data(), raw_handle.size()));
    post_json(
        "/v2/cudasharedmemory/region/" + name + "/register",
        {{"raw_handle", {{"b64", text}}}, {"device_id", device_id}, {"byte_size", byte_size}});
  }
  void unregister_cuda_region(const std::string& name) override {
    post_json("/v2/cudasharedmemory/region/" + name + "/unregister", json::object());
  }

 private:
  std::unique_ptr<httplib::Client> c_;
};

inference::InferParameter to_param(const json& v) {
  inference::InferParameter p;
  if (v.is_boolean()) p.set_bool_param(v.get<bool>());
  else if (v.is_number_integer()) p.set_int64_param(v.get<std::int64_t>());
  else if (v.is_number()) p.set_double_param(v.get<double>());
  else if (v.is_string()) p.set_string_param(v.get<std::string>());
  else throw InputError("parameters", "only bool, integer, number and string parameters travel over gRPC");
  return p;
}

json from_param(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return p.bool_param();
    case inference::InferParameter::kInt64Param: return p.int64_param();
    case inference::InferParameter::kStringParam: return p.string_param();
    case inference::InferParameter::kDoubleParam: return p.double_param();
    case inference::InferParameter::kUint64Param: return p.uint64_param();
    default: return nullptr;
  }
}

void set_shared_memory(google::protobuf::Map<std::string, inference::InferParameter>& p,
                       const rt::daemon::SharedMemoryRef& ref) {
  p["shared_memory_region"].set_string_param(ref.region);
  p["shared_memory_offset"].set_int64_param(static_cast<std::int64_t>(ref.offset));
  p["shared_memory_byte_size"].set_int64_param(static_cast<std::int64_t>(ref.byte_size));
}

// Without the raw contents: framed_request appends them without a copy.
inference::ModelInferRequest request_header(const std::string& model,
                                            const std::vector<Tensor>& inputs, const json& params,
                                            const std::vector<RequestedOutput>& outputs) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  for (const Tensor& t : inputs) {
    auto* in = r.add_inputs();
    in->set_name(t.name);
    in->set_datatype(t.datatype);
    for (std::int64_t d : t.shape) in->add_shape(d);
    if (t.shared_memory) set_shared_memory(*in->mutable_parameters(), *t.shared_memory);
  }
  for (const RequestedOutput& o : outputs) {
    auto* out = r.add_outputs();
    out->set_name(o.name);
    if (o.shared_memory) set_shared_memory(*out->mutable_parameters(), *o.shared_memory);
  }
  for (const auto& [k, v] : params.items()) (*r.mutable_parameters())[k] = to_param(v);
  return r;
}

// The request as the bytes of its message, with each input's raw contents referenced where they
// lie instead of copied into the message and again into its serialisation: the header fields
// serialised, then one raw_input_contents field per input (a protobuf message may be written in
// any field order, and repeated fields keep the order they are written in). gRPC's transport writes
// slices with sendmsg's iovecs, so a 35 MB x goes from the tensor to the socket with only the
// kernel's copy. The slices borrow the tensors' memory: it must stay alive until the answer has
// come (the server answers only once it has read every byte).
grpc::ByteBuffer framed_request(const std::string& model, const std::vector<Tensor>& inputs,
                                const json& params, const std::vector<RequestedOutput>& outputs) {
  constexpr int kRawInputContents = 7;  // ModelInferRequest.raw_input_contents (grpc_service.proto)
  std::vector<grpc::Slice> slices;
  slices.emplace_back(request_header(model, inputs, params, outputs).SerializeAsString());
  for (const Tensor& t : inputs) {
    if (t.shared_memory) continue;
    const std::string_view bytes = t.bytes();
    std::string tag;
    {
      google::protobuf::io::StringOutputStream out(&tag);
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
          kRawInputContents,
          google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
      coded.WriteVarint64(bytes.size());
    }
    slices.emplace_back(std::move(tag));
    if (!bytes.empty()) slices.emplace_back(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

InferResponse from_response(inference::ModelInferResponse& r) {
  InferResponse out;
  out.model_name = r.model_name();
  out.id = r.id();
  for (const auto& [k, v] : r.parameters()) out.parameters[k] = from_param(v);
  if (r.raw_output_contents_size() != r.outputs_size())
    throw Error("gRPC response: " + std::to_string(r.outputs_size()) + " outputs but " +
                std::to_string(r.raw_output_contents_size()) + " raw_output_contents");
  for (int i = 0; i < r.outputs_size(); ++i) {
    const auto& o = r.outputs(i);
    Tensor t;
    t.name = o.name();
    t.datatype = o.datatype();
    t.shape.assign(o.shape().begin(), o.shape().end());
    if (auto it = o.parameters().find("shared_memory_region"); it != o.parameters().end()) {
      // In the client's region: the caller reads it there.
      const auto& p = o.parameters();
      t.shared_memory = rt::daemon::SharedMemoryRef{
          it->second.string_param(),
          p.count("shared_memory_offset") ? static_cast<std::uint64_t>(p.at("shared_memory_offset").int64_param()) : 0,
          p.count("shared_memory_byte_size") ? static_cast<std::uint64_t>(p.at("shared_memory_byte_size").int64_param())
                                             : 0};
      out.outputs.push_back(std::move(t));
      continue;
    }
    t.raw = std::move(*r.mutable_raw_output_contents(i));  // the parsed bytes, not a copy
    const std::size_t want = static_cast<std::size_t>(t.elements()) * rt::daemon::datatype_size(t.datatype, "outputs[" + std::to_string(i) + "]");
    if (t.raw.size() != want)
      throw Error("gRPC response: output '" + t.name + "' has " + std::to_string(t.raw.size()) + " bytes, shape needs " +
                  std::to_string(want));
    out.outputs.push_back(std::move(t));
  }
  return out;
}

std::string grpc_error(const grpc::Status& s) {
  return "gRPC " + std::to_string(static_cast<int>(s.error_code())) + ": " + s.error_message();
}

class GrpcTransport final : public Transport {
 public:
  GrpcTransport(const Endpoint& e, bool streaming) : streaming_(streaming), token_(e.token), owner_(e.graph_owner) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (e.tls) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = e.tls_ca_pem;  // empty: gRPC's default roots
      credentials = grpc::SslCredentials(ssl);
    }
    channel_ =
        grpc::CreateCustomChannel(e.grpc_socket.empty() ? e.host + ":" + std::to_string(e.grpc_port)
                                                        : "unix:" + e.grpc_socket,
                                  credentials, args);
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }
  ~GrpcTransport() override { close_stream(); }

  InferResponse infer(const std::string& model, const std::vector<Tensor>& inputs,
                      const json& params, const std::vector<RequestedOutput>& outputs) override {
    if (!streaming_) {
      grpc::ClientContext ctx;
      authorize(ctx);
      inference::ModelInferResponse r;
      // The stub's ModelInfer, with the request's framed bytes as the message.
      const grpc::Status s = grpc::internal::BlockingUnaryCall(
          channel_.get(), unary_method_, &ctx, framed_request(model, inputs, params, outputs), &r);
      if (!s.ok()) throw Error(grpc_error(s));
      return from_response(r);
    }
    if (!stream_) {
      ctx_ = std::make_unique<grpc::ClientContext>();
      authorize(*ctx_);
      // The generated stub's stream, writing framed bytes instead of a message (what the stub's
      // ModelStreamInfer does, with grpc::ByteBuffer as the written type).
      stream_.reset(grpc::internal::ClientReaderWriterFactory<
                    grpc::ByteBuffer, inference::ModelStreamInferResponse>::Create(channel_.get(),
                                                                                   stream_method_,
                                                                                   ctx_.get()));
    }
    inference::ModelStreamInferResponse r;
    if (!stream_->Write(framed_request(model, inputs, params, outputs)) || !stream_->Read(&r)) {
      const grpc::Status s = close_stream();
      throw Error("gRPC stream closed: " + grpc_error(s));
    }
    // A failed request is answered in the stream (Triton's convention); the stream stays open.
    if (!r.error_message().empty()) throw Error("gRPC stream: " + r.error_message());
    return from_response(*r.mutable_infer_response());
  }

  ModelInfo model_info(const std::string& model) override {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest q;
    q.set_name(model);
    inference::ModelMetadataResponse r;
    const grpc::Status s = stub_->ModelMetadata(&ctx, q, &r);
    if (!s.ok()) throw Error(grpc_error(s));
    if (r.inputs_size() == 0 || r.inputs(0).shape_size() < 2) throw Error("model '" + model + "' metadata: no input x [rows, features]");
    int out_columns = 0;
    for (const auto& o : r.outputs())
      if (o.name() == "y" && o.shape_size() == 2) out_columns = static_cast<int>(o.shape(1));
    return {r.platform() == "dype_transformer", static_cast<int>(r.inputs(0).shape(1)), out_columns};
  }

  void register_region(const std::string& name, const std::string& key, std::uint64_t byte_size) override {
    grpc::ClientContext ctx;
    authorize(ctx);
    inference::SystemSharedMemoryRegisterRequest q;
    q.set_name(name);
    q.set_key(key);
    q.set_byte_size(byte_size);
    inference::SystemSharedMemoryRegisterResponse r;
    if (const grpc::Status s = stub_->SystemSharedMemoryRegister(&ctx, q, &r); !s.ok()) throw Error(grpc_error(s));
  }
  void unregister_region(const std::string& name) override {
    grpc::ClientContext ctx;
    authorize(ctx);
    inference::SystemSharedMemoryUnregisterRequest q;
    q.set_name(name);
    inference::SystemSharedMemoryUnregisterResponse r;
    if (const grpc::Status s = stub_->SystemSharedMemoryUnregister(&ctx, q, &r); !s.ok()) throw Error(grpc_error(s));
  }
  void register_cuda_region(const std::string& name, const std::string& raw_handle, int device_id,
                            std::uint64_t byte_size) override {
    grpc::ClientContext ctx;
    authorize(ctx);
    inference::CudaSharedMemoryRegisterRequest q;
    q.set_name(name);
    q.set_raw_handle(raw_handle);
    q.set_device_id(device_id);
    q.set_byte_size(byte_size);
    inference::CudaSharedMemoryRegisterResponse r;
    if (const grpc::Status s = stub_->CudaSharedMemoryRegister(&ctx, q, &r); !s.ok())
      throw Error(grpc_error(s));
  }
  void unregister_cuda_region(const std::string& name) override {
    grpc::ClientContext ctx;
    authorize(ctx);
    inference::CudaSharedMemoryUnregisterRequest q;
    q.set_name(name);
    inference::CudaSharedMemoryUnregisterResponse r;
    if (const grpc::Status s = stub_->CudaSharedMemoryUnregister(&ctx, q, &r); !s.ok())
      throw Error(grpc_error(s));
  }

 private:
  grpc::Status close_stream() {
    if (!stream_) return grpc::Status::OK;
    stream_->WritesDone();
    grpc::Status s = stream_->Finish();
    stream_.reset();
    ctx_.reset();
    return s;
  }

  bool streaming_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const grpc::internal::RpcMethod unary_method_{"/inference.GRPCInferenceService/ModelInfer",
                                                grpc::internal::RpcMethod::NORMAL_RPC};
  const grpc::internal::RpcMethod stream_method_{"/inference.GRPCInferenceService/ModelStreamInfer",
                                                 grpc::internal::RpcMethod::BIDI_STREAMING};
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::string token_;
  std::string owner_;  // Dype-Graph-Owner's gRPC twin: whose shared-memory regions these are
  void authorize(grpc::ClientContext& ctx) const {
    if (!token_.empty()) ctx.AddMetadata("authorization", "Bearer " + token_);
    if (!owner_.empty()) ctx.AddMetadata("dype-graph-owner", owner_);
  }
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, inference::ModelStreamInferResponse>>
      stream_;
};

}  // namespace

std::unique_ptr<Transport> make_transport(Protocol protocol, const Endpoint& endpoint, bool streaming) {
  if (protocol == Protocol::grpc) return std::make_unique<GrpcTransport>(endpoint, streaming);
  return std::make_unique<HttpTransport>(endpoint);
}

std::vector<Tensor> graph_tensors(const kernels::EdgeList& g) {
  std::vector<std::int64_t> ei = g.src;
  ei.insert(ei.end(), g.dst.begin(), g.dst.end());
  std::vector<Tensor> t{Tensor::from_i64("edge_index", {2, g.num_edges()}, ei)};
  if (!g.weight.empty()) t.push_back(Tensor::from_f32("edge_weight", {g.num_edges()}, g.weight));
  return t;
}

std::string register_graph(const Endpoint& endpoint, const kernels::EdgeList& graph) {
  auto c = http_client(endpoint, endpoint.http_port);
  const rt::daemon::EncodedBody b =
      rt::daemon::encode_infer_request("", graph_tensors(graph), json{{"num_nodes", graph.num_nodes}}, true, false);
  auto r = c->Post("/v2/dype/graphs", {{"Inference-Header-Content-Length", std::to_string(*b.header_length)}}, b.body,
                   "application/octet-stream");
  if (!r) throw Error("graph registration: no response from server: " + http_error(r.error()));
  if (r->status != 200) throw Error("graph registration: HTTP " + std::to_string(r->status) + ": " + r->body);
  return json::parse(r->body).at("id").get<std::string>();
}

bool delete_graph(const Endpoint& endpoint, const std::string& id) {
  auto c = http_client(endpoint, endpoint.http_port);
  auto r = c->Delete(("/v2/dype/graphs/" + id).c_str());
  if (!r) throw Error("graph deletion: no response from server: " + http_error(r.error()));
  if (r->status == 404) return false;
  if (r->status != 200) throw Error("graph deletion: HTTP " + std::to_string(r->status) + ": " + r->body);
  return true;
}

nlohmann::json list_graphs(const Endpoint& endpoint) {
  auto c = http_client(endpoint, endpoint.http_port);
  return get_json(*c, "/v2/dype/graphs").at("graphs");
}

std::vector<std::string> delete_all_graphs(const Endpoint& endpoint) {
  auto c = http_client(endpoint, endpoint.http_port);
  auto r = c->Delete("/v2/dype/graphs");
  if (!r) throw Error("graph deletion: no response from server: " + http_error(r.error()));
  if (r->status != 200) throw Error("graph deletion: HTTP " + std::to_string(r->status) + ": " + r->body);
  return json::parse(r->body).at("deleted").get<std::vector<std::string>>();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(std::min<double>(static_cast<double>(v.size() - 1), std::floor(p * static_cast<double>(v.size()))))];
}

long plan_epoch(const Endpoint& e, const std::string& model, std::string* label) {
  httplib::Client m(e.host, e.metrics_port);
  m.set_read_timeout(2, 0);
  auto r = m.Get("/metrics");
  if (!r || r->status != 200) return -1;
  if (label) {
    const std::string info = "dype_plan_info{model=\"" + model + "\",plan=\"";
    if (const auto i = r->body.find(info); i != std::string::npos) {
      const auto a = i + info.size();
      *label = r->body.substr(a, r->body.find('"', a) - a);
      const std::string pk = "pipeline=\"";
      if (const auto pi = r->body.find(pk, a); pi != std::string::npos && pi < r->body.find('\n', a))
        *label += " [" + r->body.substr(pi + pk.size(), r->body.find('"', pi + pk.size()) - pi - pk.size()) + "]";
    }
  }
  const std::string key = "dype_plan_epoch{model=\"" + model + "\"} ";
  const auto p = r->body.find(key);
  return p == std::string::npos ? -1 : std::stol(r->body.substr(p + key.size()));
}

}  // namespace dype::client
