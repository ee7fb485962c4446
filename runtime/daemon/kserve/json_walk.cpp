#include "runtime/daemon/kserve/json_walk.h"

namespace dype::rt::daemon::json_walk {

using nlohmann::json;

[[noreturn]] void malformed(simdjson::error_code e) {
  throw InputError("request body", std::string("malformed JSON: ") + simdjson::error_message(e));
}

[[noreturn]] void too_deep() {
  throw InputError("request body",
                   "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
}

std::string token_text(od::value& v) {
  std::string_view t = v.raw_json_token();
  while (!t.empty() &&
         (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t'))
    t.remove_suffix(1);
  if (t.size() > 40) return std::string(t.substr(0, 37)) + "...";
  return std::string(t);
}

json to_json(od::value v, std::size_t depth) {
  switch (ok(v.type())) {
    case od::json_type::object: {
      if (depth > kMaxJsonDepth) too_deep();
      json o = json::object();
      for (auto f : ok(v.get_object())) {
        od::field field = ok(std::move(f));
        std::string key(ok(field.unescaped_key()));
        o[std::move(key)] = to_json(field.value(), depth + 1);
      }
      return o;
    }
    case od::json_type::array: {
      if (depth > kMaxJsonDepth) too_deep();
      json a = json::array();
      for (auto e : ok(v.get_array())) a.push_back(to_json(ok(std::move(e)), depth + 1));
      return a;
    }
    case od::json_type::string:
      return std::string(ok(v.get_string()));
    case od::json_type::boolean:
      return ok(v.get_bool());
    case od::json_type::null:
      if (!ok(v.is_null())) malformed(simdjson::N_ATOM_ERROR);
      return nullptr;
    case od::json_type::number: {
      od::number n = ok(v.get_number());
      switch (n.get_number_type()) {
        case od::number_type::signed_integer: {
          const std::int64_t i = n.get_int64();
          if (i >= 0) return static_cast<std::uint64_t>(i);
          return i;
        }
        case od::number_type::unsigned_integer:
          return n.get_uint64();
        case od::number_type::floating_point_number:
          return n.get_double();
      }
    }
  }
  malformed(simdjson::INCORRECT_TYPE);
}

void skip_bounded(od::value v, std::size_t depth) {
  switch (ok(v.type())) {
    case od::json_type::array:
      if (depth > kMaxJsonDepth) too_deep();
      for (auto e : ok(v.get_array())) skip_bounded(ok(std::move(e)), depth + 1);
      return;
    case od::json_type::object:
      if (depth > kMaxJsonDepth) too_deep();
      for (auto m : ok(v.get_object())) skip_bounded(ok(std::move(m)).value(), depth + 1);
      return;
    default:
      return;  // a scalar: On-Demand steps over it
  }
}

Kind kind_of(const std::string& dt, const std::string& where) {
  if (dt == "FP32") return Kind::f32;
  if (dt == "FP64") return Kind::f64;
  if (dt == "BOOL") return Kind::boolean;
  if (dt == "INT8") return Kind::i8;
  if (dt == "INT16") return Kind::i16;
  if (dt == "INT32") return Kind::i32;
  if (dt == "INT64") return Kind::i64;
  if (dt == "UINT8") return Kind::u8;
  if (dt == "UINT16") return Kind::u16;
  if (dt == "UINT32") return Kind::u32;
  if (dt == "UINT64") return Kind::u64;
  throw InputError(where + ".datatype", dt + " cannot be given as JSON data here");
}

}  // namespace dype::rt::daemon::json_walk
