// Parsing an infer request (and, for dype-client, a response) with simdjson's On-Demand parser.
// No document tree is built: the parser walks the JSON header once, keeps the few small fields it
// needs, and writes each tensor's "data" array straight into the tensor's bytes after counting its
// elements against the declared shape (so nothing proportional to a declared shape is allocated
// before the data is known to fill it). Memory beyond the body: simdjson's structural index (4
// bytes per token, touched only as far as the text goes) and the tensors themselves.
//
// Nesting: simdjson 3.0's On-Demand parser enforces its max_depth only in development-checks builds,
// so the bound is kept here: every value of a document that is accepted is walked with its level
// counted (data arrays, parameters, and members this parser does not use), and one deeper than
// kMaxJsonDepth is refused as before; no body can exhaust a worker's stack (On-Demand itself skips
// values with a counter, not recursion).
#include <cstring>
#include <limits>
#include <memory>

#include <simdjson.h>

#include "common/error.h"
#include "runtime/daemon/kserve/json_depth.h"
#include "runtime/daemon/kserve/json_walk.h"
#include "runtime/daemon/kserve/tensor.h"

namespace dype::rt::daemon {
namespace {

using nlohmann::json;
using namespace json_walk;
static_assert(kJsonReadPaddingBytes >= simdjson::SIMDJSON_PADDING);

constexpr std::size_t kMaxShapeDims = 64;
// Documents up to this size use the thread's own parser (its buffers kept between requests);
// larger ones a parser of their own, freed with the request, so a worker does not keep the index
// of the largest body it ever saw.
constexpr std::size_t kKeepParserBytes = std::size_t{1} << 20;

// --- Tensors -----------------------------------------------------------------------------------

// What a tensor object holds, gathered in one pass in whatever order its members come, and checked
// afterwards in a fixed order (so a message does not depend on the members' order).
struct TensorFields {
  enum class State { absent, ok, bad };
  State name = State::absent, datatype = State::absent, shape = State::absent, parameters = State::absent;
  std::string name_text, datatype_text;
  std::vector<std::int64_t> dims;
  std::string shape_error_at, shape_error;  // the first bad dimension
  std::optional<std::int64_t> binary_size;
  bool binary_size_bad = false;
  SharedMemoryParams shm;
  bool has_data = false, data_done = false;
};

std::string read_string(od::value v, TensorFields::State& state) {
  std::string_view s;
  if (v.get_string().get(s)) {
    state = TensorFields::State::bad;
    return {};
  }
  state = TensorFields::State::ok;
  return std::string(s);
}

void read_shape(od::value v, TensorFields& f) {
  od::array a;
  if (v.get_array().get(a)) {
    f.shape = TensorFields::State::bad;
    return;
  }
  f.shape = TensorFields::State::ok;
  std::size_t i = 0;
  for (auto e : a) {
    od::value d = ok(std::move(e));
    if (!f.shape_error.empty()) continue;
    if (i >= kMaxShapeDims) {
      f.shape_error = "has more than " + std::to_string(kMaxShapeDims) + " dimensions";
      continue;
    }
    std::int64_t x;
    od::number n;
    if (d.get_number().get(n) || n.get_number_type() == od::number_type::floating_point_number) {
      f.shape_error_at = "[" + std::to_string(i) + "]";
      f.shape_error = "is " + token_text(d) + ", not an integer";
      continue;
    }
    // 2^63 and above: as large as an int64 goes, refused as too many elements.
    x = n.get_number_type() == od::number_type::unsigned_integer ? std::numeric_limits<std::int64_t>::max() : n.get_int64();
    f.dims.push_back(x);
    ++i;
  }
}

// One of Triton's shared-memory parameters (`key`) into `shm`; false for any other key. A value of
// the wrong type is kept as such, for shared_memory_ref to name.
bool read_shared_memory_param(std::string_view key, od::value v, SharedMemoryParams& shm) {
  if (key == "shared_memory_region") {
    std::string_view s;
    if (v.get_string().get(s)) shm.region_bad = true;
    else shm.region = std::string(s);
    return true;
  }
  std::optional<std::int64_t>* slot = key == "shared_memory_byte_size" ? &shm.byte_size
                                      : key == "shared_memory_offset"  ? &shm.offset
                                                                       : nullptr;
  if (!slot) return false;
  od::number n;
  if (v.get_number().get(n) || n.get_number_type() == od::number_type::floating_point_number) {
    (key == "shared_memory_byte_size" ? shm.byte_size_bad : shm.offset_bad) = true;
    return true;
  }
  if (n.get_number_type() == od::number_type::unsigned_integer) *slot = -1;  // past int64: refused as negative
  else *slot = n.get_int64();
  return true;
}

void read_tensor_parameters(od::value v, TensorFields& f) {
  od::object o;
  if (v.get_object().get(o)) {
    f.parameters = TensorFields::State::bad;
    return;
  }
  f.parameters = TensorFields::State::ok;
  for (auto m : o) {
    od::field field = ok(std::move(m));
    const std::string_view key = ok(field.unescaped_key());
    if (read_shared_memory_param(key, field.value(), f.shm)) continue;
    if (key != "binary_data_size") {
      skip_bounded(field.value(), 5);
      continue;
    }
    std::int64_t size;
    od::number n;
    f.binary_size_bad = field.value().get_number().get(n) || n.get_number_type() != od::number_type::signed_integer ||
                        (size = n.get_int64()) < 0;
    if (!f.binary_size_bad) f.binary_size = size;
  }
}

struct TensorPlan {
  std::string where;
  std::size_t esize = 0;
  std::int64_t elements = 0;
};

// The checks before any data, in the order the messages have always come in.
TensorPlan check_header(const TensorFields& f, const std::string& field, std::size_t i, const std::vector<Tensor>& prev) {
  if (f.name != TensorFields::State::ok) throw InputError(field + "[" + std::to_string(i) + "].name", "missing or not a string");
  TensorPlan p;
  p.where = field + "['" + f.name_text + "']";
  for (const Tensor& t : prev)
    if (t.name == f.name_text) throw InputError(p.where, "given twice");
  if (f.datatype != TensorFields::State::ok) throw InputError(p.where + ".datatype", "missing or not a string");
  p.esize = datatype_size(f.datatype_text, p.where + ".datatype");
  if (p.esize == 0) throw InputError(p.where + ".datatype", "BYTES tensors are not accepted by dype models");
  if (f.shape == TensorFields::State::absent) throw InputError(p.where + ".shape", "missing");
  if (f.shape == TensorFields::State::bad) throw InputError(p.where + ".shape", "must be an array of integers");
  if (!f.shape_error.empty()) throw InputError(p.where + ".shape" + f.shape_error_at, f.shape_error);
  p.elements = element_count(f.dims, p.where);
  return p;
}

void check_parameters(const TensorFields& f, const TensorPlan& p) {
  if (f.parameters == TensorFields::State::bad) throw InputError(p.where + ".parameters", "must be an object");
  if (f.binary_size_bad) throw InputError(p.where + ".parameters.binary_data_size", "must be a non-negative integer");
}

// Counts the data's scalars against the declared shape, then parses them into x.raw, sized once.
void read_data(od::value v, Tensor& x, const TensorPlan& p) {
  const Kind kind = kind_of(x.datatype, p.where);
  std::int64_t given;
  if (ok(v.type()) == od::json_type::array) {
    od::array a = ok(v.get_array());
    given = 0;
    for (auto e : a) given += DataWriter::count(ok(std::move(e)), 5);
    ok(a.reset());
    if (given != p.elements)
      throw InputError(p.where + ".data", "has " + std::to_string(given) + " elements, shape " + shape_text(x.shape) +
                                              " needs " + std::to_string(p.elements));
    x.raw.resize(static_cast<std::size_t>(p.elements) * p.esize);
    DataWriter w(kind, x.datatype, p.where, x.raw.data());
    for (auto e : a) w.write(ok(std::move(e)), 5);
    if (w.written() != p.elements) malformed(simdjson::TAPE_ERROR);
    return;
  }
  if (p.elements != 1)  // a lone scalar is one element
    throw InputError(p.where + ".data", "has 1 elements, shape " + shape_text(x.shape) + " needs " + std::to_string(p.elements));
  x.raw.resize(p.esize);
  DataWriter w(kind, x.datatype, p.where, x.raw.data());
  w.write(v, 5);
}

// One tensor object. Its data is parsed in the same pass when name, datatype and shape came before
// it (Triton's clients write them first), else the object is rewound to it afterwards (nlohmann
// writes keys sorted: "data" first).
Tensor read_tensor(od::object obj, const std::string& field, std::size_t i, std::string_view binary,
                   std::size_t& offset, bool data_required, bool borrow, const std::vector<Tensor>& prev) {
  TensorFields f;
  Tensor x;
  auto start_data = [&](od::value v) {
    const TensorPlan p = check_header(f, field, i, prev);
    x.name = f.name_text;
    x.datatype = f.datatype_text;
    x.shape = f.dims;
    read_data(v, x, p);
    f.data_done = true;
  };
  for (auto m : obj) {
    od::field member = ok(std::move(m));
    const std::string_view key = ok(member.unescaped_key());
    if (key == "name") f.name_text = read_string(member.value(), f.name);
    else if (key == "datatype") f.datatype_text = read_string(member.value(), f.datatype);
    else if (key == "shape") read_shape(member.value(), f);
    else if (key == "parameters") read_tensor_parameters(member.value(), f);
    else if (key == "data") {
      f.has_data = true;
      if (f.name == TensorFields::State::ok && f.datatype == TensorFields::State::ok && f.shape == TensorFields::State::ok &&
          !f.binary_size && f.parameters != TensorFields::State::bad)
        start_data(member.value());
    } else {
      skip_bounded(member.value(), 4);
    }
  }
  const TensorPlan p = check_header(f, field, i, prev);
  x.name = f.name_text;
  x.datatype = f.datatype_text;
  x.shape = f.dims;
  check_parameters(f, p);
  const std::size_t want = static_cast<std::size_t>(p.elements) * p.esize;
  x.shared_memory = shared_memory_ref(f.shm, p.where);
  if (x.shared_memory) {
    if (f.has_data) throw InputError(p.where, "has both data and parameters.shared_memory_region");
    if (f.binary_size) throw InputError(p.where, "has both parameters.binary_data_size and shared_memory_region");
    check_shared_memory_size(*x.shared_memory, want, x.datatype, x.shape, p.where);
  } else if (f.binary_size) {
    if (f.has_data) throw InputError(p.where, "has both data and parameters.binary_data_size");
    if (static_cast<std::size_t>(*f.binary_size) != want)
      throw InputError(p.where + ".parameters.binary_data_size",
                       std::to_string(*f.binary_size) + " bytes, but " + x.datatype + " " + shape_text(x.shape) +
                           " needs " + std::to_string(want));
    if (offset + want > binary.size())
      throw InputError(p.where + ".parameters.binary_data_size",
                       "runs past the end of the binary data (" + std::to_string(offset + want) + " > " +
                           std::to_string(binary.size()) + " bytes)");
    if (borrow) x.view = binary.substr(offset, want);
    else x.raw.assign(binary.substr(offset, want));
    offset += want;
  } else if (f.has_data) {
    if (!f.data_done) {
      ok(obj.reset());
      read_data(ok(obj.find_field("data")), x, p);
    }
  } else if (data_required) {
    throw InputError(p.where, "has neither data nor parameters.binary_data_size");
  }
  return x;
}

// The tensors of "inputs"/"outputs" from the JSON header plus the binary section.
std::vector<Tensor> read_tensors(od::value v, const std::string& field, std::string_view binary, bool data_required,
                                 bool borrow) {
  od::array arr;
  if (v.get_array().get(arr)) throw InputError(field, "must be an array");
  std::vector<Tensor> out;
  std::size_t offset = 0, i = 0;
  for (auto e : arr) {
    od::value t = ok(std::move(e));
    od::object obj;
    if (t.get_object().get(obj)) throw InputError(field + "[" + std::to_string(i) + "]", "must be an object");
    out.push_back(read_tensor(obj, field, i, binary, offset, data_required, borrow, out));
    ++i;
  }
  if (offset != binary.size())
    throw InputError("binary data", std::to_string(binary.size() - offset) + " bytes left over after the last tensor");
  return out;
}

// --- The document --------------------------------------------------------------------------------

// The JSON header of a body and the binary section after it, and a parser over the header: in place
// when enough bytes after it may be read, else over a padded copy.
class Header {
 public:
  Header(std::string_view body, std::optional<std::size_t> header_length, std::size_t readable_past_end) {
    text_ = body;
    if (header_length) {
      if (*header_length > body.size())
        throw InputError("Inference-Header-Content-Length",
                         std::to_string(*header_length) + " is past the end of the " + std::to_string(body.size()) +
                             "-byte body");
      text_ = body.substr(0, *header_length);
      binary_ = body.substr(*header_length);
    }
    padding_ = binary_.size() + readable_past_end;
    if (padding_ < simdjson::SIMDJSON_PADDING) {
      copy_ = simdjson::padded_string(text_);
      text_ = std::string_view(copy_.data(), copy_.size());
      padding_ = simdjson::SIMDJSON_PADDING;
    }
    if (text_.size() > kKeepParserBytes) own_parser_ = std::make_unique<od::parser>();
  }

  std::string_view binary() const { return binary_; }

  // The document's root object; InputError when the text is not JSON or not an object.
  od::object root() {
    static thread_local od::parser shared;
    od::parser& parser = own_parser_ ? *own_parser_ : shared;
    if (const auto e = parser.iterate(text_.data(), text_.size(), text_.size() + padding_).get(doc_)) malformed(e);
    od::object o;
    if (const auto e = doc_.get_object().get(o)) {
      if (e == simdjson::INCORRECT_TYPE) throw InputError("request body", "must be a JSON object");
      malformed(e);
    }
    return o;
  }

  // After the root object has been read to its end: nothing but whitespace may follow it.
  void check_end() {
    const char* at;
    if (doc_.current_location().get(at) == simdjson::SUCCESS) malformed(simdjson::TRAILING_CONTENT);
  }

 private:
  std::string_view text_, binary_;
  std::size_t padding_ = 0;
  simdjson::padded_string copy_;
  std::unique_ptr<od::parser> own_parser_;
  od::document doc_;
};

// Runs `read` with simdjson's exceptions (a malformed document found while walking it) as InputError.
template <typename F>
auto guarded(F&& read) {
  try {
    return read();
  } catch (const simdjson::simdjson_error& e) {
    malformed(e.error());
  }
}

}  // namespace

InferRequest parse_infer_request(std::string_view body, std::optional<std::size_t> header_length, bool borrow_binary,
                                 std::size_t readable_past_end) {
  Header header(body, header_length, readable_past_end);
  return guarded([&] {
    InferRequest r;
    bool has_inputs = false;
    struct Output {
      std::string name;
      std::optional<bool> binary;
      std::optional<SharedMemoryRef> shared_memory;
    };
    std::vector<Output> outputs;
    bool has_outputs = false;
    for (auto m : header.root()) {
      od::field member = ok(std::move(m));
      const std::string_view key = ok(member.unescaped_key());
      if (key == "id") {
        std::string_view id;
        if (member.value().get_string().get(id)) throw InputError("id", "must be a string");
        r.id = std::string(id);
      } else if (key == "parameters") {
        if (ok(member.value().type()) != od::json_type::object) throw InputError("parameters", "must be an object");
        r.parameters = to_json(member.value(), 2);
      } else if (key == "inputs") {
        has_inputs = true;
        r.inputs = read_tensors(member.value(), "inputs", header.binary(), true, borrow_binary);
      } else if (key == "outputs") {
        has_outputs = true;
        outputs.clear();
        od::array arr;
        if (member.value().get_array().get(arr)) throw InputError("outputs", "must be an array");
        std::size_t i = 0;
        for (auto e : arr) {
          const std::string where = "outputs[" + std::to_string(i++) + "]";
          od::value o = ok(std::move(e));
          od::object obj;
          if (o.get_object().get(obj)) throw InputError(where + ".name", "missing or not a string");
          Output out;
          SharedMemoryParams shm;
          TensorFields::State name = TensorFields::State::absent;
          for (auto om : obj) {
            od::field f = ok(std::move(om));
            const std::string_view k = ok(f.unescaped_key());
            if (k == "name") {
              out.name = read_string(f.value(), name);
            } else if (k == "parameters" && ok(f.value().type()) == od::json_type::object) {
              for (auto pm : ok(f.value().get_object())) {
                od::field p = ok(std::move(pm));
                const std::string_view pk = ok(p.unescaped_key());
                if (read_shared_memory_param(pk, p.value(), shm)) continue;
                if (pk != "binary_data") {
                  skip_bounded(p.value(), 5);
                  continue;
                }
                bool b;
                if (p.value().get_bool().get(b)) throw InputError(where + ".parameters.binary_data", "must be a boolean");
                out.binary = b;
              }
            } else {
              skip_bounded(f.value(), 4);
            }
          }
          if (name != TensorFields::State::ok) throw InputError(where + ".name", "missing or not a string");
          out.shared_memory = shared_memory_ref(shm, where);
          outputs.push_back(std::move(out));
        }
      } else {
        skip_bounded(member.value(), 2);
      }
    }
    header.check_end();
    if (r.parameters.contains("binary_data_output")) {
      if (!r.parameters["binary_data_output"].is_boolean()) throw InputError("parameters.binary_data_output", "must be a boolean");
      r.binary_output = r.parameters["binary_data_output"].get<bool>();
    }
    if (!has_inputs) throw InputError("inputs", "missing");
    if (has_outputs)
      for (Output& o : outputs) {
        // An output written to shared memory has no data in the response, binary or JSON.
        const bool binary = !o.shared_memory && o.binary.value_or(r.binary_output);
        r.outputs.push_back({std::move(o.name), binary, std::move(o.shared_memory)});
      }
    return r;
  });
}

InferResponse parse_infer_response(std::string_view body, std::optional<std::size_t> header_length,
                                   std::size_t readable_past_end) {
  Header header(body, header_length, readable_past_end);
  return guarded([&] {
    InferResponse r;
    bool has_outputs = false;
    for (auto m : header.root()) {
      od::field member = ok(std::move(m));
      const std::string_view key = ok(member.unescaped_key());
      if (key == "error") {
        throw Error("server: " + to_json(member.value(), 2).dump(-1, ' ', false, json::error_handler_t::replace));
      } else if (key == "model_name" || key == "id") {
        std::string_view s;
        if (!member.value().get_string().get(s)) (key == "id" ? r.id : r.model_name) = std::string(s);
        else skip_bounded(member.value(), 2);
      } else if (key == "parameters") {
        r.parameters = to_json(member.value(), 2);
      } else if (key == "outputs") {
        has_outputs = true;
        r.outputs = read_tensors(member.value(), "outputs", header.binary(), true, false);
      } else {
        skip_bounded(member.value(), 2);
      }
    }
    header.check_end();
    if (!has_outputs) throw InputError("response", "has no outputs");
    return r;
  });
}

}  // namespace dype::rt::daemon
