#pragma once
// Open Inference Protocol (KServe v2) tensors: parsing an infer request body (JSON, with or without
// the binary tensor data extension) and encoding a response. Pure functions over bytes, shared by
// the HTTP front end, the gRPC front end (which fills Tensor from protobuf) and dype-client.
//
//   InferRequest r = parse_infer_request(body, header_length);   // InputError on any problem
//   const Tensor& x = r.input("x");   std::vector<float> xs = x.f32();
//   EncodedBody out = encode_infer_response(info, {y}, /*binary=*/true);
//
// Binary extension: the JSON header is the first Inference-Header-Content-Length bytes; each input
// with parameters.binary_data_size takes that many bytes from what follows, in input order.
//
// Bounds (tensor_parse.cpp, tensor.cpp): the JSON header is read with simdjson's On-Demand parser,
// without a document tree: a tensor's "data" array is counted, checked against its declared shape,
// and only then parsed straight into the tensor's bytes, so a declared [1e12, 64] with two values is
// a 400 naming the field and a 50 MB JSON request costs about its tensors' bytes, not a tree of
// them. Nesting deeper than kMaxJsonDepth is refused wherever the parser descends (values it skips
// are skipped without recursion); invalid UTF-8 is malformed JSON. JSON data in a response is
// written number by number into the body, refused (TooLarge, 413) past max_json_bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dype::hw {
class DeviceIpcMemory;
}

namespace dype::rt {
struct AnswerMemory;
}

namespace dype::rt::daemon {

// Bytes per element of a KServe datatype ("FP32" -> 4); 0 for BYTES; InputError when unknown.
std::size_t datatype_size(std::string_view datatype, const std::string& where);
// The product of `shape`'s dimensions; InputError naming `where`.shape[i] for a negative one and
// `where`.shape when the product (times 16 bytes) would not fit an int64.
std::int64_t element_count(const std::vector<std::int64_t>& shape, const std::string& where);
// "[2,3]"
std::string shape_text(const std::vector<std::int64_t>& shape);

// Bytes readable past the end of a JSON text that lets the parser read it in place (simdjson's
// SIMDJSON_PADDING); with fewer, the text is copied first. The HTTP transport leaves this much room
// after every body it receives (body_buffer.h).
inline constexpr std::size_t kJsonReadPaddingBytes = 64;
// The default bound on a response's JSON encoding (dype-serve --max-response-bytes).
inline constexpr std::size_t kDefaultMaxResponseBytes = std::size_t{256} << 20;

// The shared-memory parameters of an input or a requested output (Triton's shared-memory
// extension): the region's name and where in it the tensor's bytes lie.
struct SharedMemoryRef {
  std::string region;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
};

// Memory a request's tensors view in place (a registered region, shm/): kept mapped while the
// request is built, and checked once read (a region whose object shrank meanwhile is refused, as
// an InputError naming `where`).
struct HeldMemory {
  virtual ~HeldMemory() = default;
  virtual void check_read(const std::string& where) const = 0;
  // Whether `bytes` at `data` are known to hold no NaN/Inf as FP32: checked when they were
  // received, and unable to change since (false: not known, check them).
  virtual bool known_finite_f32(const void* /*data*/, std::size_t /*bytes*/) const { return false; }
};

// Where an output goes instead of the response (a registered region, shm/): write() copies the
// output's bytes there, or throws InputError naming `where`.
struct OutputSink {
  virtual ~OutputSink() = default;
  virtual void write(std::string_view bytes, const std::string& where) const = 0;
  // Memory for the engine to write a whole output of `bytes` into itself (Request::
  // set_answer_memory), or null. Once the engine wrote there, write() copies nothing and only
  // checks the memory stayed whole.
  virtual std::shared_ptr<const rt::AnswerMemory> memory_for(std::size_t /*bytes*/) const {
    return nullptr;
  }
  virtual bool written_in_place() const { return false; }
};

// Triton's shared-memory parameters of one tensor as a request gave them (a wrong type marked).
struct SharedMemoryParams {
  std::optional<std::string> region;
  std::optional<std::int64_t> byte_size, offset;
  bool region_bad = false, byte_size_bad = false, offset_bad = false;
};
// None given: nullopt. Else shared_memory_region (a non-empty string) and shared_memory_byte_size
// (an integer >= 0) are both needed, shared_memory_offset (>= 0) defaults to 0; InputError naming
// `where`.parameters.<key> otherwise.
std::optional<SharedMemoryRef> shared_memory_ref(const SharedMemoryParams& params, const std::string& where);
// An input's byte_size must be exactly its shape times its datatype's size.
void check_shared_memory_size(const SharedMemoryRef& ref, std::size_t want, const std::string& datatype,
                              const std::vector<std::int64_t>& shape, const std::string& where);

struct Tensor {
  std::string name;
  std::string datatype;              // KServe name: FP32, INT64, ...
  std::vector<std::int64_t> shape;
  std::string raw;                   // little-endian element bytes, elements() * size
  // When set, the element bytes instead: a slice of a request body the caller keeps alive
  // (parse_infer_request with borrow_binary), so a large binary tensor is not copied to get here.
  std::optional<std::string_view> view = std::nullopt;
  // Input: its bytes are in this region (bound by bind_shared_memory, which sets `view`). Output:
  // its bytes were written there, and the response carries these parameters instead of data.
  std::optional<SharedMemoryRef> shared_memory = std::nullopt;
  // Input x in a CUDA region: left in that GPU memory (at shared_memory->offset), no bytes here;
  // the request builder checks it there and the engine copies it in place (rt::DeviceFeatures).
  std::shared_ptr<const hw::DeviceIpcMemory> device = nullptr;

  std::string_view bytes() const { return view ? *view : std::string_view(raw); }
  std::int64_t elements() const;
  // Typed copies; InputError naming the tensor when the datatype differs. i64() also widens INT32.
  std::vector<float> f32() const;
  std::vector<std::int64_t> i64() const;
  // Typed views of the bytes in place when the datatype matches and they are aligned for T;
  // otherwise a copy into `scratch` (INT32 widened for i64). Same checks as f32()/i64().
  std::span<const float> f32_span(std::vector<float>& scratch) const;
  std::span<const std::int64_t> i64_span(std::vector<std::int64_t>& scratch) const;

  static Tensor from_f32(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& v);
  static Tensor from_i64(std::string name, std::vector<std::int64_t> shape,
                         const std::vector<std::int64_t>& v);
};

struct RequestedOutput {
  std::string name;
  bool binary = false;
  std::optional<SharedMemoryRef> shared_memory = std::nullopt;
  std::shared_ptr<const OutputSink> sink = nullptr;  // set by bind_shared_memory
};

struct InferRequest {
  std::string id;
  std::vector<Tensor> inputs;
  nlohmann::json parameters = nlohmann::json::object();
  std::vector<RequestedOutput> outputs;  // empty: all outputs
  // What shared-memory inputs view, with the field each was named in (bind_shared_memory).
  std::vector<std::pair<std::string, std::shared_ptr<const HeldMemory>>> held;
  bool binary_output = false;            // parameters.binary_data_output

  const Tensor* find(std::string_view name) const;
  // Parameter lookups with type checks (InputError "parameters.window: ...").
  std::optional<std::int64_t> int_parameter(const std::string& key) const;
  std::optional<std::string> string_parameter(const std::string& key) const;
};

// header_length: the Inference-Header-Content-Length header, when present. borrow_binary: binary
// tensors view `body` (Tensor::view) instead of copying it; the caller keeps body alive while the
// request is used. readable_past_end: bytes after `body` that may be read (not written); with
// kJsonReadPaddingBytes or more the JSON header is parsed where it lies, else from a copy.
InferRequest parse_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                 bool borrow_binary = false, std::size_t readable_past_end = 0);

struct EncodedBody {
  std::string body;
  std::optional<std::size_t> header_length;  // set when binary data follows the JSON
  std::string content_type = "application/json";
};

struct ResponseHeader {
  std::string model_name;
  std::string model_version = "1";
  std::string id;
  nlohmann::json parameters = nlohmann::json::object();
};

// binary: per output, whether its data goes in the binary section (else as a JSON "data" array,
// each number written straight into the body). max_json_bytes bounds the JSON part: an output whose
// data would take it past the bound is refused with TooLarge (413) naming the output and the bound
// and suggesting binary output, before more than the bound is written.
EncodedBody encode_infer_response(const ResponseHeader& header, const std::vector<Tensor>& outputs,
                                  const std::vector<bool>& binary,
                                  std::size_t max_json_bytes = kDefaultMaxResponseBytes);
// The same response's JSON header alone (body = header; header_length and content_type as above):
// the binary tensors' bytes, in output order, are the caller's to send after it from where they
// lie, so a large output is not copied into a body first.
EncodedBody encode_infer_response_header(const ResponseHeader& header, const std::vector<Tensor>& outputs,
                                         const std::vector<bool>& binary,
                                         std::size_t max_json_bytes = kDefaultMaxResponseBytes);
// A double as encode_infer_response_header writes it (shortest round-trip form; null when not finite).
std::string json_number_text(double v);
// The client side: same body format as a request (inputs in binary when binary is true).
// `outputs`, when given, are the outputs asked for (a shared_memory one names its region).
// inline_binary false: the body ends with the JSON header (header_length still set) and the binary
// inputs' bytes are the caller's to send after it, in input order (those not in shared memory),
// e.g. straight from the tensors instead of through a copy into the body.
EncodedBody encode_infer_request(const std::string& id, const std::vector<Tensor>& inputs,
                                 const nlohmann::json& parameters, bool binary, bool binary_output,
                                 const std::vector<RequestedOutput>& outputs = {},
                                 bool inline_binary = true);
// Client side: parse a response body (outputs + parameters) in either form.
struct InferResponse {
  std::string model_name;
  std::string id;
  nlohmann::json parameters = nlohmann::json::object();
  std::vector<Tensor> outputs;
};
InferResponse parse_infer_response(std::string_view body, std::optional<std::size_t> header_length,
                                   std::size_t readable_past_end = 0);

}  // namespace dype::rt::daemon
