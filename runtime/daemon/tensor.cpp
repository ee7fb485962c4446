#include "runtime/daemon/tensor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/error.h"
#include "runtime/daemon/json_depth.h"

namespace dype::rt::daemon {
namespace {

using nlohmann::json;

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::int64_t element_count(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw InputError(where + ".shape[" + std::to_string(i) + "]", "is negative (" + std::to_string(shape[i]) + ")");
    if (shape[i] != 0 && n > std::numeric_limits<std::int64_t>::max() / 16 / shape[i])
      throw InputError(where + ".shape", shape_str(shape) + " has too many elements");
    n *= shape[i];
  }
  return n;
}

// Appends the scalars of a (possibly nested) JSON array as little-endian bytes of `dt`.
template <typename T>
void append_scalar(std::string& raw, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  raw.append(b, sizeof(T));
}

void flatten(const json& j, const std::string& dt, const std::string& where, std::int64_t& index,
             std::string& raw) {
  if (j.is_array()) {
    for (const json& e : j) flatten(e, dt, where, index, raw);
    return;
  }
  const std::string at = where + ".data[" + std::to_string(index) + "]";
  ++index;
  if (dt == "BOOL") {
    if (!j.is_boolean()) throw InputError(at, "is " + j.dump() + ", BOOL needs true/false");
    append_scalar<std::uint8_t>(raw, j.get<bool>() ? 1 : 0);
    return;
  }
  if (!j.is_number()) throw InputError(at, "is " + j.dump() + ", not a number");
  if (dt == "FP32" || dt == "FP64") {
    const double v = j.get<double>();
    if (dt == "FP32") append_scalar<float>(raw, static_cast<float>(v));
    else append_scalar<double>(raw, v);
    return;
  }
  if (!j.is_number_integer()) throw InputError(at, "is " + j.dump() + ", " + dt + " needs an integer");
  const bool is_unsigned = dt[0] == 'U';
  if (is_unsigned && j.is_number_integer() && !j.is_number_unsigned() && j.get<std::int64_t>() < 0)
    throw InputError(at, "is negative, " + dt + " is unsigned");
  auto check_range = [&](long double lo, long double hi) {
    const long double v = j.is_number_unsigned() ? static_cast<long double>(j.get<std::uint64_t>())
                                                 : static_cast<long double>(j.get<std::int64_t>());
    if (v < lo || v > hi) throw InputError(at, j.dump() + " does not fit " + dt);
  };
  if (dt == "INT8") { check_range(-128, 127); append_scalar<std::int8_t>(raw, static_cast<std::int8_t>(j.get<std::int64_t>())); }
  else if (dt == "INT16") { check_range(-32768, 32767); append_scalar<std::int16_t>(raw, static_cast<std::int16_t>(j.get<std::int64_t>())); }
  else if (dt == "INT32") { check_range(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()); append_scalar<std::int32_t>(raw, static_cast<std::int32_t>(j.get<std::int64_t>())); }
  else if (dt == "INT64") {
    if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw InputError(at, j.dump() + " does not fit INT64");
    append_scalar<std::int64_t>(raw, j.get<std::int64_t>());
  }
  else if (dt == "UINT8") { check_range(0, 255); append_scalar<std::uint8_t>(raw, static_cast<std::uint8_t>(j.get<std::uint64_t>())); }
  else if (dt == "UINT16") { check_range(0, 65535); append_scalar<std::uint16_t>(raw, static_cast<std::uint16_t>(j.get<std::uint64_t>())); }
  else if (dt == "UINT32") { check_range(0, std::numeric_limits<std::uint32_t>::max()); append_scalar<std::uint32_t>(raw, static_cast<std::uint32_t>(j.get<std::uint64_t>())); }
  else if (dt == "UINT64") append_scalar<std::uint64_t>(raw, j.get<std::uint64_t>());
  else throw InputError(where + ".datatype", dt + " cannot be given as JSON data here");
}

// Scalars in a (nested) JSON data array; the depth was bounded before parsing (json_depth.h).
std::int64_t leaf_count(const json& j) {
  if (!j.is_array()) return 1;
  std::int64_t n = 0;
  for (const json& e : j) n += leaf_count(e);
  return n;
}

std::vector<std::int64_t> parse_shape(const json& j, const std::string& where) {
  if (!j.is_array()) throw InputError(where + ".shape", "must be an array of integers");
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer()) throw InputError(where + ".shape[" + std::to_string(i) + "]", "is " + j[i].dump() + ", not an integer");
    shape.push_back(j[i].get<std::int64_t>());
  }
  return shape;
}

std::optional<std::int64_t> binary_size_param(const json& t, const std::string& where) {
  if (!t.contains("parameters")) return std::nullopt;
  const json& p = t["parameters"];
  if (!p.is_object()) throw InputError(where + ".parameters", "must be an object");
  if (!p.contains("binary_data_size")) return std::nullopt;
  if (!p["binary_data_size"].is_number_integer() || p["binary_data_size"].get<std::int64_t>() < 0)
    throw InputError(where + ".parameters.binary_data_size", "must be a non-negative integer");
  return p["binary_data_size"].get<std::int64_t>();
}

// Parses the tensors of "inputs"/"outputs" from a JSON header plus the binary section.
std::vector<Tensor> parse_tensors(const json& arr, const std::string& field, std::string_view binary,
                                  bool data_required, bool borrow) {
  std::vector<Tensor> out;
  if (!arr.is_array()) throw InputError(field, "must be an array");
  std::size_t offset = 0;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    std::string where = field + "[" + std::to_string(i) + "]";
    if (!t.is_object()) throw InputError(where, "must be an object");
    if (!t.contains("name") || !t["name"].is_string()) throw InputError(where + ".name", "missing or not a string");
    Tensor x;
    x.name = t["name"].get<std::string>();
    where = field + "['" + x.name + "']";
    for (const Tensor& prev : out)
      if (prev.name == x.name) throw InputError(where, "given twice");
    if (!t.contains("datatype") || !t["datatype"].is_string()) throw InputError(where + ".datatype", "missing or not a string");
    x.datatype = t["datatype"].get<std::string>();
    const std::size_t esize = datatype_size(x.datatype, where + ".datatype");
    if (esize == 0) throw InputError(where + ".datatype", "BYTES tensors are not accepted by dype models");
    if (!t.contains("shape")) throw InputError(where + ".shape", "missing");
    x.shape = parse_shape(t["shape"], where);
    const std::int64_t n = element_count(x.shape, where);
    const std::size_t want = static_cast<std::size_t>(n) * esize;
    if (auto bsize = binary_size_param(t, where)) {
      if (t.contains("data")) throw InputError(where, "has both data and parameters.binary_data_size");
      if (static_cast<std::size_t>(*bsize) != want)
        throw InputError(where + ".parameters.binary_data_size",
                         std::to_string(*bsize) + " bytes, but " + x.datatype + " " + shape_str(x.shape) +
                             " needs " + std::to_string(want));
      if (offset + want > binary.size())
        throw InputError(where + ".parameters.binary_data_size",
                         "runs past the end of the binary data (" + std::to_string(offset + want) + " > " +
                             std::to_string(binary.size()) + " bytes)");
      if (borrow) x.view = binary.substr(offset, want);
      else x.raw.assign(binary.substr(offset, want));
      offset += want;
    } else if (t.contains("data")) {
      // Count before allocating: a declared shape of [1e12, 64] with two values is refused here,
      // not by a failed allocation of its 256 TB.
      const std::int64_t given = leaf_count(t["data"]);
      if (given != n)
        throw InputError(where + ".data", "has " + std::to_string(given) + " elements, shape " + shape_str(x.shape) +
                                              " needs " + std::to_string(n));
      std::int64_t index = 0;
      x.raw.reserve(want);
      flatten(t["data"], x.datatype, where, index, x.raw);
      if (index != n)
        throw InputError(where + ".data", "has " + std::to_string(index) + " elements, shape " + shape_str(x.shape) +
                                              " needs " + std::to_string(n));
    } else if (data_required) {
      throw InputError(where, "has neither data nor parameters.binary_data_size");
    }
    out.push_back(std::move(x));
  }
  if (offset != binary.size())
    throw InputError("binary data", std::to_string(binary.size() - offset) + " bytes left over after the last tensor");
  return out;
}

json parse_header(std::string_view body, std::optional<std::size_t> header_length, std::string_view& binary) {
  std::string_view header = body;
  binary = {};
  if (header_length) {
    if (*header_length > body.size())
      throw InputError("Inference-Header-Content-Length",
                       std::to_string(*header_length) + " is past the end of the " + std::to_string(body.size()) +
                           "-byte body");
    header = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  check_json_depth(header, "request body");
  json j;
  try {
    j = json::parse(header.begin(), header.end());
  } catch (const json::parse_error& e) {
    throw InputError("request body", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw InputError("request body", "must be a JSON object");
  return j;
}

}  // namespace

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

nlohmann::json Tensor::data_json() const {
  if (datatype == "FP32") return f32();
  if (datatype == "INT64" || datatype == "INT32") return i64();
  throw Error("tensor '" + name + "': JSON encoding of " + datatype + " is not implemented");
}

const Tensor* InferRequest::find(std::string_view name) const {
  for (const Tensor& t : inputs)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<std::int64_t> InferRequest::int_parameter(const std::string& key) const {
  if (!parameters.contains(key)) return std::nullopt;
  if (!parameters[key].is_number_integer()) throw InputError("parameters." + key, "is " + parameters[key].dump() + ", not an integer");
  return parameters[key].get<std::int64_t>();
}

std::optional<std::string> InferRequest::string_parameter(const std::string& key) const {
  if (!parameters.contains(key)) return std::nullopt;
  if (!parameters[key].is_string()) throw InputError("parameters." + key, "is " + parameters[key].dump() + ", not a string");
  return parameters[key].get<std::string>();
}

InferRequest parse_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                 bool borrow_binary) {
  std::string_view binary;
  const json j = parse_header(body, header_length, binary);
  InferRequest r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) throw InputError("id", "must be a string");
    r.id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    if (!j["parameters"].is_object()) throw InputError("parameters", "must be an object");
    r.parameters = j["parameters"];
    if (r.parameters.contains("binary_data_output")) {
      if (!r.parameters["binary_data_output"].is_boolean()) throw InputError("parameters.binary_data_output", "must be a boolean");
      r.binary_output = r.parameters["binary_data_output"].get<bool>();
    }
  }
  if (!j.contains("inputs")) throw InputError("inputs", "missing");
  r.inputs = parse_tensors(j["inputs"], "inputs", binary, true, borrow_binary);
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) throw InputError("outputs", "must be an array");
    for (std::size_t i = 0; i < j["outputs"].size(); ++i) {
      const json& o = j["outputs"][i];
      const std::string where = "outputs[" + std::to_string(i) + "]";
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) throw InputError(where + ".name", "missing or not a string");
      RequestedOutput out{o["name"].get<std::string>(), r.binary_output};
      if (o.contains("parameters") && o["parameters"].is_object() && o["parameters"].contains("binary_data")) {
        if (!o["parameters"]["binary_data"].is_boolean()) throw InputError(where + ".parameters.binary_data", "must be a boolean");
        out.binary = o["parameters"]["binary_data"].get<bool>();
      }
      r.outputs.push_back(out);
    }
  }
  return r;
}

namespace {
// The JSON header with each binary tensor's size; bin_size: the bytes that follow it.
std::string encode_header(json header, const char* field, const std::vector<Tensor>& tensors,
                          const std::vector<bool>& binary, std::size_t& bin_size) {
  bin_size = 0;
  json arr = json::array();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    json o = {{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
    if (i < binary.size() && binary[i]) {
      o["parameters"] = {{"binary_data_size", t.bytes().size()}};
      bin_size += t.bytes().size();
    } else {
      o["data"] = t.data_json();
    }
    arr.push_back(std::move(o));
  }
  header[field] = std::move(arr);
  return header.dump();
}

// The binary sections are appended straight after the JSON header in one buffer sized up front,
// so each tensor's bytes are copied once.
EncodedBody encode(json header, const char* field, const std::vector<Tensor>& tensors, const std::vector<bool>& binary) {
  std::size_t bin_size = 0;
  EncodedBody out;
  out.body = encode_header(std::move(header), field, tensors, binary, bin_size);
  if (bin_size > 0) {
    out.header_length = out.body.size();
    out.body.reserve(out.body.size() + bin_size);
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (i < binary.size() && binary[i]) out.body += tensors[i].bytes();
    out.content_type = "application/octet-stream";
  }
  return out;
}

json response_json(const ResponseHeader& h) {
  json header = {{"model_name", h.model_name}, {"model_version", h.model_version}};
  if (!h.id.empty()) header["id"] = h.id;
  if (!h.parameters.empty()) header["parameters"] = h.parameters;
  return header;
}
}  // namespace

EncodedBody encode_infer_response(const ResponseHeader& h, const std::vector<Tensor>& outputs,
                                  const std::vector<bool>& binary) {
  return encode(response_json(h), "outputs", outputs, binary);
}

namespace {
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

void append_int(std::string& out, std::int64_t v) {
  char text[24];
  out.append(text, std::to_chars(text, text + sizeof text, v).ptr);
}
}  // namespace

std::string json_number_text(double v) {
  std::string s;
  append_number(s, v);
  return s;
}

EncodedBody encode_infer_response_header(const ResponseHeader& h, const std::vector<Tensor>& outputs,
                                         const std::vector<bool>& binary) {
  bool all_binary = true;
  for (std::size_t i = 0; i < outputs.size(); ++i) all_binary = all_binary && i < binary.size() && binary[i];
  EncodedBody out;
  if (!all_binary || outputs.empty()) {  // JSON data: rare, and nlohmann writes the data arrays
    std::size_t bin_size = 0;
    out.body = encode_header(response_json(h), "outputs", outputs, binary, bin_size);
    if (bin_size > 0) {
      out.header_length = out.body.size();
      out.content_type = "application/octet-stream";
    }
    return out;
  }
  // Binary outputs only: written directly, without building a json tree and dumping it (measured
  // ~25 us of each response). Same document as encode_infer_response, keys in its (sorted) order.
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
  b += ",\"outputs\":[";
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    b += i ? ",{\"datatype\":" : "{\"datatype\":";
    append_string(b, t.datatype);
    b += ",\"name\":";
    append_string(b, t.name);
    b += ",\"parameters\":{\"binary_data_size\":";
    append_int(b, static_cast<std::int64_t>(t.bytes().size()));
    b += "},\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (d) b += ',';
      append_int(b, t.shape[d]);
    }
    b += "]}";
  }
  b += ']';
  if (!h.parameters.empty()) {
    b += ",\"parameters\":{";
    bool first = true;
    for (const auto& [key, value] : h.parameters.items()) {
      if (!first) b += ',';
      first = false;
      append_string(b, key);
      b += ':';
      if (value.is_number_float()) append_number(b, value.get<double>());
      else b += value.dump();
    }
    b += '}';
  }
  b += '}';
  out.header_length = b.size();
  out.content_type = "application/octet-stream";
  return out;
}

EncodedBody encode_infer_request(const std::string& id, const std::vector<Tensor>& inputs,
                                 const nlohmann::json& parameters, bool binary, bool binary_output) {
  json header = json::object();
  if (!id.empty()) header["id"] = id;
  json params = parameters.is_object() ? parameters : json::object();
  if (binary_output) params["binary_data_output"] = true;
  if (!params.empty()) header["parameters"] = params;
  return encode(std::move(header), "inputs", inputs, std::vector<bool>(inputs.size(), binary));
}

InferResponse parse_infer_response(std::string_view body, std::optional<std::size_t> header_length) {
  std::string_view binary;
  const json j = parse_header(body, header_length, binary);
  if (j.contains("error")) throw Error("server: " + j["error"].dump());
  InferResponse r;
  if (j.contains("model_name") && j["model_name"].is_string()) r.model_name = j["model_name"].get<std::string>();
  if (j.contains("id") && j["id"].is_string()) r.id = j["id"].get<std::string>();
  if (j.contains("parameters")) r.parameters = j["parameters"];
  if (!j.contains("outputs")) throw InputError("response", "has no outputs");
  r.outputs = parse_tensors(j["outputs"], "outputs", binary, true, false);
  return r;
}

}  // namespace dype::rt::daemon
