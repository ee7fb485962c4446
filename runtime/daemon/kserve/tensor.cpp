#include "runtime/daemon/kserve/tensor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::int64_t element_count(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw InputError(where + ".shape[" + std::to_string(i) + "]", "is negative (" + std::to_string(shape[i]) + ")");
    if (shape[i] != 0 && n > std::numeric_limits<std::int64_t>::max() / 16 / shape[i])
      throw InputError(where + ".shape", shape_text(shape) + " has too many elements");
    n *= shape[i];
  }
  return n;
}

std::size_t datatype_size(std::string_view dt, const std::string& where) {
  if (dt == "BOOL" || dt == "INT8" || dt == "UINT8") return 1;
  if (dt == "INT16" || dt == "UINT16" || dt == "FP16" || dt == "BF16") return 2;
  if (dt == "INT32" || dt == "UINT32" || dt == "FP32") return 4;
  if (dt == "INT64" || dt == "UINT64" || dt == "FP64") return 8;
  if (dt == "BYTES") return 0;
  throw InputError(where, "unknown datatype '" + std::string(dt) + "'");
}

std::int64_t Tensor::elements() const { return element_count(shape, "tensor '" + name + "'"); }

std::vector<float> Tensor::f32() const {
  if (datatype != "FP32") throw InputError("input '" + name + "'", "datatype is " + datatype + ", expected FP32");
  const std::string_view b = bytes();
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

std::vector<std::int64_t> Tensor::i64() const {
  const std::string_view b = bytes();
  if (datatype == "INT64") {
    std::vector<std::int64_t> v(b.size() / 8);
    std::memcpy(v.data(), b.data(), v.size() * 8);
    return v;
  }
  if (datatype == "INT32") {
    std::vector<std::int64_t> v(b.size() / 4);
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::int32_t w;
      std::memcpy(&w, b.data() + 4 * i, 4);
      v[i] = w;
    }
    return v;
  }
  throw InputError("input '" + name + "'", "datatype is " + datatype + ", expected INT64");
}

namespace {
template <typename T>
bool aligned_for(std::string_view b) {
  return reinterpret_cast<std::uintptr_t>(b.data()) % alignof(T) == 0;
}
}  // namespace

std::span<const float> Tensor::f32_span(std::vector<float>& scratch) const {
  const std::string_view b = bytes();
  if (datatype == "FP32" && aligned_for<float>(b))
    return {reinterpret_cast<const float*>(b.data()), b.size() / sizeof(float)};
  scratch = f32();
  return scratch;
}

std::span<const std::int64_t> Tensor::i64_span(std::vector<std::int64_t>& scratch) const {
  const std::string_view b = bytes();
  if (datatype == "INT64" && aligned_for<std::int64_t>(b))
    return {reinterpret_cast<const std::int64_t*>(b.data()), b.size() / sizeof(std::int64_t)};
  scratch = i64();
  return scratch;
}

Tensor Tensor::from_f32(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  Tensor t{std::move(name), "FP32", std::move(shape), {}, std::nullopt};
  t.raw.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_i64(std::string name, std::vector<std::int64_t> shape, const std::vector<std::int64_t>& v) {
  Tensor t{std::move(name), "INT64", std::move(shape), {}, std::nullopt};
  t.raw.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int64_t));
  return t;
}

const Tensor* InferRequest::find(std::string_view name) const {
  for (const Tensor& t : inputs)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<std::int64_t> InferRequest::int_parameter(const std::string& key) const {
  if (!parameters.contains(key)) return std::nullopt;
  const nlohmann::json& v = parameters[key];
  if (!v.is_number_integer()) throw InputError("parameters." + key, "is " + v.dump() + ", not an integer");
  // 2^63 and above arrive unsigned: read as int64 they wrapped to negatives ("is -1").
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw InputError("parameters." + key, "is " + v.dump() + ", past the largest integer taken, 2^63 - 1");
  return v.get<std::int64_t>();
}

std::optional<std::string> InferRequest::string_parameter(const std::string& key) const {
  if (!parameters.contains(key)) return std::nullopt;
  if (!parameters[key].is_string()) throw InputError("parameters." + key, "is " + parameters[key].dump() + ", not a string");
  return parameters[key].get<std::string>();
}

namespace {

using nlohmann::json;

// A JSON string; through nlohmann (which also rejects invalid UTF-8) unless it is plain ASCII.
void append_string(std::string& out, std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80) {
      out += json(std::string(s)).dump();
      return;
    }
  }
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // as nlohmann writes it
    return;
  }
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, v).ptr;
  out.append(text, end);
  // nlohmann writes a whole double as "2.0", so it parses back as a float, not an integer.
  if (std::find_if(text, end, [](char c) { return c == '.' || c == 'e'; }) == end) out += ".0";
}

template <typename I>
void append_int(std::string& out, I v) {
  char text[24];
  out.append(text, std::to_chars(text, text + sizeof text, v).ptr);
}

// The object's members as nlohmann would dump them (its keys are sorted), floats in the shortest
// form that reads back equal.
void append_parameters(std::string& b, const json& params) {
  b += '{';
  bool first = true;
  for (const auto& [key, value] : params.items()) {
    if (!first) b += ',';
    first = false;
    append_string(b, key);
    b += ':';
    if (value.is_number_float()) append_number(b, value.get<double>());
    else b += value.dump();
  }
  b += '}';
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Writes the elements of `bytes` as T, each through `put`, stopping with `refuse` once the body is
// past `max_bytes` (so it never holds more than the bound plus one number).
template <typename T, typename Put, typename Refuse>
void append_elements(std::string& b, std::string_view bytes, std::size_t max_bytes, Put put, Refuse refuse) {
  const std::size_t n = bytes.size() / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    if (i) b += ',';
    put(b, load<T>(bytes.data() + i * sizeof(T)));
    if (b.size() > max_bytes) refuse();
  }
}

// The characters one element can take as JSON, its comma included ("-1.2345678901234567e-308,").
std::size_t max_chars(std::string_view dt) {
  if (dt == "FP32" || dt == "FP64") return 25;
  if (dt == "INT64" || dt == "UINT64") return 21;
  if (dt == "INT32" || dt == "UINT32") return 12;
  if (dt == "INT16" || dt == "UINT16") return 7;
  if (dt == "BOOL") return 6;
  return 5;  // INT8, UINT8
}

// A tensor's "data" array, written number by number into `b`. FP32 values are written as the
// doubles they widen to (as the nlohmann tree did), so a reader parsing doubles gets each float back
// exactly; the digits are std::to_chars' shortest, which for ~0.4% of values differ in the last place
// from nlohmann's grisu2 digits (both read back equal). NaN and infinities as null.
void append_data(std::string& b, const Tensor& t, const std::string& where, std::size_t max_bytes) {
  const std::string_view bytes = t.bytes();
  const std::size_t esize = datatype_size(t.datatype, where + ".datatype");
  if (esize == 0 || t.datatype == "FP16" || t.datatype == "BF16")
    throw Error(where + ": JSON encoding of " + t.datatype + " is not implemented");
  const std::size_t n = bytes.size() / esize;
  auto refuse = [&] {
    throw TooLarge(where + ": " + t.datatype + " " + shape_text(t.shape) + " as JSON data takes more than " +
                   std::to_string(max_bytes) + " bytes (--max-response-bytes); ask for it as binary data " +
                   "(parameters.binary_data_output: true, or the output's parameters.binary_data: true)");
  };
  // Every element takes at least a digit and a comma: refuse at once what cannot fit.
  if (n > (max_bytes - std::min(max_bytes, b.size())) / 2) refuse();
  // Room for the worst case up to the bound (address space; pages are only touched as written).
  b.reserve(std::min(max_bytes, b.size() + n * max_chars(t.datatype)) + 32);
  b += '[';
  const std::string& dt = t.datatype;
  const auto put_int = [](std::string& o, auto v) { append_int(o, v); };
  if (dt == "FP32") append_elements<float>(b, bytes, max_bytes, [](std::string& o, float v) { append_number(o, v); }, refuse);
  else if (dt == "FP64") append_elements<double>(b, bytes, max_bytes, [](std::string& o, double v) { append_number(o, v); }, refuse);
  else if (dt == "INT64") append_elements<std::int64_t>(b, bytes, max_bytes, put_int, refuse);
  else if (dt == "INT32") append_elements<std::int32_t>(b, bytes, max_bytes, put_int, refuse);
  else if (dt == "INT16") append_elements<std::int16_t>(b, bytes, max_bytes, put_int, refuse);
  else if (dt == "INT8") append_elements<std::int8_t>(b, bytes, max_bytes, [](std::string& o, std::int8_t v) { append_int(o, static_cast<int>(v)); }, refuse);
  else if (dt == "UINT64") append_elements<std::uint64_t>(b, bytes, max_bytes, put_int, refuse);
  else if (dt == "UINT32") append_elements<std::uint32_t>(b, bytes, max_bytes, put_int, refuse);
  else if (dt == "UINT16") append_elements<std::uint16_t>(b, bytes, max_bytes, put_int, refuse);
  else if (dt == "UINT8") append_elements<std::uint8_t>(b, bytes, max_bytes, [](std::string& o, std::uint8_t v) { append_int(o, static_cast<unsigned>(v)); }, refuse);
  else if (dt == "BOOL") append_elements<std::uint8_t>(b, bytes, max_bytes, [](std::string& o, std::uint8_t v) { o += v ? "true" : "false"; }, refuse);
  b += ']';
}

// One tensor of "inputs"/"outputs", keys in nlohmann's (sorted) order: data, datatype, name,
// parameters, shape.
void append_tensor(std::string& b, const Tensor& t, bool binary, const char* field, std::size_t max_bytes) {
  b += '{';
  if (!binary && !t.shared_memory) {
    b += "\"data\":";
    append_data(b, t, std::string(field) + "['" + t.name + "']", max_bytes);
    b += ',';
  }
  b += "\"datatype\":";
  append_string(b, t.datatype);
  b += ",\"name\":";
  append_string(b, t.name);
  if (t.shared_memory) {
    // Its bytes are in the region (Triton's shared-memory extension): the parameters say where.
    b += ",\"parameters\":{\"shared_memory_byte_size\":";
    append_int(b, t.shared_memory->byte_size);
    b += ",\"shared_memory_offset\":";
    append_int(b, t.shared_memory->offset);
    b += ",\"shared_memory_region\":";
    append_string(b, t.shared_memory->region);
    b += '}';
  } else if (binary) {
    b += ",\"parameters\":{\"binary_data_size\":";
    append_int(b, static_cast<std::uint64_t>(t.bytes().size()));
    b += '}';
  }
  b += ",\"shape\":[";
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    if (d) b += ',';
    append_int(b, t.shape[d]);
  }
  b += "]}";
}

// The tensors' array and what follows it; marks the body binary when any tensor goes as binary data.
void append_tensors(EncodedBody& out, const char* field, const std::vector<Tensor>& tensors,
                    const std::vector<bool>& binary, std::size_t max_bytes) {
  std::string& b = out.body;
  b += '"';
  b += field;
  b += "\":[";
  bool any_binary = false;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const bool bin = i < binary.size() && binary[i] && !tensors[i].shared_memory;
    any_binary = any_binary || bin;
    if (i) b += ',';
    append_tensor(b, tensors[i], bin, field, max_bytes);
  }
  b += ']';
  if (any_binary) out.content_type = "application/octet-stream";
}

void finish(EncodedBody& out, std::size_t max_bytes) {
  out.body += '}';
  if (out.body.size() > max_bytes)
    throw TooLarge("response: its JSON takes more than " + std::to_string(max_bytes) + " bytes (--max-response-bytes)");
  if (out.content_type != "application/json") out.header_length = out.body.size();
}

// The binary tensors' bytes appended after the JSON header in one buffer sized up front, so each
// tensor's bytes are copied once.
void append_binary(EncodedBody& out, const std::vector<Tensor>& tensors, const std::vector<bool>& binary) {
  std::size_t bin_size = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (i < binary.size() && binary[i] && !tensors[i].shared_memory) bin_size += tensors[i].bytes().size();
  out.body.reserve(out.body.size() + bin_size);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (i < binary.size() && binary[i] && !tensors[i].shared_memory) out.body += tensors[i].bytes();
}

}  // namespace

std::string json_number_text(double v) {
  std::string s;
  append_number(s, v);
  return s;
}

// Written directly, without a json tree of the data (measured ~25 us of each small response for
// the tree; ~16 bytes per number and more for a large one). Keys in nlohmann's (sorted) order.
EncodedBody encode_infer_response_header(const ResponseHeader& h, const std::vector<Tensor>& outputs,
                                         const std::vector<bool>& binary, std::size_t max_json_bytes) {
  EncodedBody out;
  std::string& b = out.body;
  b.reserve(256);
  if (!h.id.empty()) {
    b += "{\"id\":";
    append_string(b, h.id);
    b += ",\"model_name\":";
  } else {
    b += "{\"model_name\":";
  }
  append_string(b, h.model_name);
  b += ",\"model_version\":";
  append_string(b, h.model_version);
  b += ',';
  append_tensors(out, "outputs", outputs, binary, max_json_bytes);
  if (!h.parameters.empty()) {
    b += ",\"parameters\":";
    append_parameters(b, h.parameters);
  }
  finish(out, max_json_bytes);
  return out;
}

EncodedBody encode_infer_response(const ResponseHeader& h, const std::vector<Tensor>& outputs,
                                  const std::vector<bool>& binary, std::size_t max_json_bytes) {
  EncodedBody out = encode_infer_response_header(h, outputs, binary, max_json_bytes);
  append_binary(out, outputs, binary);
  return out;
}

EncodedBody encode_infer_request(const std::string& id, const std::vector<Tensor>& inputs,
                                 const nlohmann::json& parameters, bool binary, bool binary_output,
                                 const std::vector<RequestedOutput>& outputs, bool inline_binary) {
  json params = parameters.is_object() ? parameters : json::object();
  if (binary_output) params["binary_data_output"] = true;
  const std::vector<bool> flags(inputs.size(), binary);
  const std::size_t unbounded = std::numeric_limits<std::size_t>::max();
  EncodedBody out;
  std::string& b = out.body;
  b += '{';
  if (!id.empty()) {
    b += "\"id\":";
    append_string(b, id);
    b += ',';
  }
  append_tensors(out, "inputs", inputs, flags, unbounded);
  if (!outputs.empty()) {
    json asked = json::array();
    for (const RequestedOutput& o : outputs) {
      json p = {{"binary_data", o.binary}};
      if (o.shared_memory)
        p = {{"shared_memory_region", o.shared_memory->region},
             {"shared_memory_offset", o.shared_memory->offset},
             {"shared_memory_byte_size", o.shared_memory->byte_size}};
      asked.push_back({{"name", o.name}, {"parameters", p}});
    }
    b += ",\"outputs\":";
    b += asked.dump();
  }
  if (!params.empty()) {
    b += ",\"parameters\":";
    append_parameters(b, params);
  }
  finish(out, unbounded);
  if (inline_binary) append_binary(out, inputs, flags);
  return out;
}

std::optional<SharedMemoryRef> shared_memory_ref(const SharedMemoryParams& p, const std::string& where) {
  if (!p.region && !p.byte_size && !p.offset && !p.region_bad && !p.byte_size_bad && !p.offset_bad) return std::nullopt;
  const std::string at = where + ".parameters.";
  if (p.region_bad || (p.region && p.region->empty()))
    throw InputError(at + "shared_memory_region", "must be a non-empty string (a registered region's name)");
  if (p.byte_size_bad || (p.byte_size && *p.byte_size < 0))
    throw InputError(at + "shared_memory_byte_size", "must be an integer >= 0");
  if (p.offset_bad || (p.offset && *p.offset < 0)) throw InputError(at + "shared_memory_offset", "must be an integer >= 0");
  if (!p.region) throw InputError(at + "shared_memory_region", "missing: shared_memory_byte_size/offset name no region");
  if (!p.byte_size) throw InputError(at + "shared_memory_byte_size", "missing: a shared-memory tensor needs its size");
  return SharedMemoryRef{*p.region, static_cast<std::uint64_t>(p.offset.value_or(0)),
                         static_cast<std::uint64_t>(*p.byte_size)};
}

void check_shared_memory_size(const SharedMemoryRef& ref, std::size_t want, const std::string& datatype,
                              const std::vector<std::int64_t>& shape, const std::string& where) {
  if (ref.byte_size != want)
    throw InputError(where + ".parameters.shared_memory_byte_size",
                     std::to_string(ref.byte_size) + " bytes, but " + datatype + " " + shape_text(shape) + " needs " +
                         std::to_string(want));
}

}  // namespace dype::rt::daemon
