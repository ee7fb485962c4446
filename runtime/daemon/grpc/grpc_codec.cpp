#include "runtime/daemon/grpc/grpc_codec.h"

#include <cstdint>

#include <grpcpp/grpcpp.h>

#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc/grpc_wire.h"
#include "runtime/daemon/proto/grpc_service.pb.h"

namespace dype::rt::daemon {
namespace {

namespace pb = inference;

nlohmann::json param_json(const pb::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case pb::InferParameter::kBoolParam:
      return p.bool_param();
    case pb::InferParameter::kInt64Param:
      return p.int64_param();
    case pb::InferParameter::kStringParam:
      return p.string_param();
    case pb::InferParameter::kDoubleParam:
      return p.double_param();
    case pb::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return nullptr;
  }
}

template <typename T, typename R>
void append_raw(std::string& raw, const R& values) {
  for (const auto& v : values) {
    const T t = static_cast<T>(v);
    raw.append(reinterpret_cast<const char*>(&t), sizeof(T));
  }
}

// Triton's shared-memory parameters among a tensor's parameters (wrong types marked).
SharedMemoryParams shared_memory_params(const google::protobuf::Map<std::string, pb::InferParameter>& params) {
  SharedMemoryParams shm;
  for (const auto& [k, v] : params) {
    if (k == "shared_memory_region") {
      if (v.parameter_choice_case() == pb::InferParameter::kStringParam) shm.region = v.string_param();
      else shm.region_bad = true;
      continue;
    }
    std::optional<std::int64_t>* slot = k == "shared_memory_byte_size" ? &shm.byte_size
                                        : k == "shared_memory_offset"  ? &shm.offset
                                                                       : nullptr;
    if (!slot) continue;
    if (v.parameter_choice_case() == pb::InferParameter::kInt64Param) *slot = v.int64_param();
    else if (v.parameter_choice_case() == pb::InferParameter::kUint64Param)
      *slot = v.uint64_param() > static_cast<std::uint64_t>(INT64_MAX) ? -1 : static_cast<std::int64_t>(v.uint64_param());
    else (k == "shared_memory_byte_size" ? shm.byte_size_bad : shm.offset_bad) = true;
  }
  return shm;
}

}  // namespace

std::string metadata_value(const grpc::ServerContextBase& context, std::string_view key) {
  const auto& md = context.client_metadata();
  const auto it = md.find(grpc::string_ref(key.data(), key.size()));
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

grpc::Status status_of(std::exception_ptr ep, std::string& reason) {
  ErrorAnswer answer = answer_for(ep);
  reason = answer.reason;
  return {answer.grpc_code, std::move(answer.message)};
}

namespace {

// `raw`: the request's raw_input_contents (in it, or received apart from it and held by `held`).
template <typename Raw>
InferRequest from_proto(const pb::ModelInferRequest& r, const Raw& raw,
                        const std::shared_ptr<const HeldMemory>& held) {
  InferRequest in;
  in.id = r.id();
  for (const auto& [k, v] : r.parameters()) in.parameters[k] = param_json(v);
  // raw_input_contents: one entry for each input whose data is not in shared memory, in order.
  std::size_t in_memory = 0;
  for (const auto& t : r.inputs()) in_memory += t.parameters().count("shared_memory_region") ? 0 : 1;
  const auto raw_size = static_cast<std::size_t>(raw.size());
  if (raw_size > 0 && raw_size != in_memory)
    throw InputError("raw_input_contents", std::to_string(raw.size()) + " entries for " +
                                               std::to_string(in_memory) +
                                               " inputs not in shared memory");
  std::size_t raw_i = 0;
  for (int i = 0; i < r.inputs_size(); ++i) {
    const auto& t = r.inputs(i);
    Tensor x;
    x.name = t.name();
    x.datatype = t.datatype();
    x.shape.assign(t.shape().begin(), t.shape().end());
    const std::string where = "inputs['" + x.name + "']";
    for (const Tensor& prev : in.inputs)
      if (prev.name == x.name) throw InputError(where, "given twice");
    const std::size_t esize = datatype_size(x.datatype, where + ".datatype");
    x.shared_memory = shared_memory_ref(shared_memory_params(t.parameters()), where);
    std::int64_t n = 1;
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      if (x.shape[d] < 0)
        throw InputError(where + ".shape[" + std::to_string(d) + "]", "is negative");
      if (x.shape[d] != 0 && n > (std::int64_t{1} << 40) / x.shape[d])
        throw InputError(where + ".shape", "too many elements");
      n *= x.shape[d];
    }
    if (x.shared_memory) {
      if (t.has_contents()) throw InputError(where, "has contents and parameters.shared_memory_region");
      check_shared_memory_size(*x.shared_memory, static_cast<std::size_t>(n) * esize, x.datatype, x.shape, where);
      in.inputs.push_back(std::move(x));
      continue;
    }
    if (raw.size() > 0) {
      if (t.has_contents()) throw InputError(where, "has contents and raw_input_contents");
      x.view = std::string_view(raw[static_cast<int>(raw_i++)]);  // in place
      if (held) in.held.emplace_back(where, held);
    } else if (x.datatype == "FP32") {
      append_raw<float>(x.raw, t.contents().fp32_contents());
    } else if (x.datatype == "INT64") {
      append_raw<std::int64_t>(x.raw, t.contents().int64_contents());
    } else if (x.datatype == "INT32") {
      append_raw<std::int32_t>(x.raw, t.contents().int_contents());
    } else if (x.datatype == "FP64") {
      append_raw<double>(x.raw, t.contents().fp64_contents());
    } else {
      throw InputError(where + ".datatype", x.datatype + " is accepted only as raw_input_contents");
    }
    if (x.bytes().size() != static_cast<std::size_t>(n) * esize)
      throw InputError(where, std::to_string(x.bytes().size()) + " data bytes, " + x.datatype +
                                  " of " + std::to_string(n) + " elements needs " +
                                  std::to_string(static_cast<std::size_t>(n) * esize));
    in.inputs.push_back(std::move(x));
  }
  for (int i = 0; i < r.outputs_size(); ++i) {
    const auto& o = r.outputs(i);
    in.outputs.push_back(
        {o.name(), true, shared_memory_ref(shared_memory_params(o.parameters()), "outputs[" + std::to_string(i) + "]")});
  }
  return in;
}

}  // namespace

InferRequest from_proto(const pb::ModelInferRequest& r) {
  return from_proto(r, r.raw_input_contents(), nullptr);
}

InferRequest from_received(const pb::ModelInferRequest& header,
                           const std::shared_ptr<const ReceivedContents>& raw) {
  if (!raw || raw->entries.empty()) return from_proto(header);
  if (header.raw_input_contents_size() != 0)
    throw InputError("raw_input_contents", "given both in the message and apart from it");
  return from_proto(header, entry_views(*raw), raw);
}

void to_proto(const std::string& model, std::int64_t version, const std::string& id,
              const std::vector<Tensor>& outputs, pb::ModelInferResponse& resp,
              std::vector<std::string_view>* raw) {
  resp.set_model_name(model);
  resp.set_model_version(std::to_string(version));
  resp.set_id(id);
  for (const Tensor& t : outputs) {
    auto* o = resp.add_outputs();
    o->set_name(t.name);
    o->set_datatype(t.datatype);
    for (std::int64_t d : t.shape) o->add_shape(d);
    if (t.shared_memory) {
      // Written into the region: the parameters say where, and its raw entry stays empty so that
      // raw_output_contents[i] is still outputs[i]'s.
      auto& p = *o->mutable_parameters();
      p["shared_memory_region"].set_string_param(t.shared_memory->region);
      p["shared_memory_byte_size"].set_int64_param(static_cast<std::int64_t>(t.shared_memory->byte_size));
      p["shared_memory_offset"].set_int64_param(static_cast<std::int64_t>(t.shared_memory->offset));
    }
    if (raw)
      raw->push_back(t.bytes());
    else
      resp.add_raw_output_contents(std::string(t.bytes()));
  }
}

}  // namespace dype::rt::daemon
