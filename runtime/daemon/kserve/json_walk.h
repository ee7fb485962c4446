#pragma once
// Walking a JSON document with simdjson's On-Demand parser for the request parser
// (tensor_parse.cpp): its errors as InputError naming the body, every value walked with its nesting
// bounded by kMaxJsonDepth, and a tensor's "data" array counted, then written straight into the
// tensor's bytes.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/daemon/kserve/json_depth.h"

namespace dype::rt::daemon::json_walk {

namespace od = simdjson::ondemand;

[[noreturn]] void malformed(simdjson::error_code e);
[[noreturn]] void too_deep();

template <typename T>
T ok(simdjson::simdjson_result<T>&& r) {
  T v;
  if (const auto e = std::move(r).get(v)) malformed(e);
  return v;
}

// The JSON text of a scalar value for a message (strings keep their quotes), at most 40 characters.
std::string token_text(od::value& v);

// A value as nlohmann::json (parameters: small), nested at most kMaxJsonDepth levels; `depth` is
// the value's own level in the document. Numbers as nlohmann would parse them: non-negative
// integers unsigned, negative ones signed, the rest floating point.
nlohmann::json to_json(od::value v, std::size_t depth);

// Walks a value this parser otherwise ignores (an unknown member), only to bound its nesting:
// `depth` is the value's level in the document.
void skip_bounded(od::value v, std::size_t depth);

// --- A tensor's "data" -------------------------------------------------------------------------

enum class Kind { f32, f64, boolean, i8, i16, i32, i64, u8, u16, u32, u64 };

Kind kind_of(const std::string& dt, const std::string& where);

// Writes the scalars of a (possibly nested) data array into `out`, each as `kind`, checking each
// one; the element count was checked first, so `out` has room for every scalar.
class DataWriter {
 public:
  DataWriter(Kind kind, const std::string& dt, const std::string& where, char* out)
      : kind_(kind), dt_(dt), where_(where), out_(out) {}

  // The scalars under `v` (1 for a scalar), without parsing them.
  static std::int64_t count(od::value v, std::size_t depth) {
    if (ok(v.type()) != od::json_type::array) return 1;
    if (depth > kMaxJsonDepth) too_deep();
    std::int64_t n = 0;
    for (auto e : ok(v.get_array())) n += count(ok(std::move(e)), depth + 1);
    return n;
  }

  void write(od::value v, std::size_t depth) {
    if (ok(v.type()) == od::json_type::array) {
      if (depth > kMaxJsonDepth) too_deep();
      for (auto e : ok(v.get_array())) write(ok(std::move(e)), depth + 1);
      return;
    }
    scalar(v);
  }

  std::int64_t written() const { return index_; }

 private:
  std::string at() const { return where_ + ".data[" + std::to_string(index_) + "]"; }

  template <typename T>
  void put(T x) {
    std::memcpy(out_, &x, sizeof x);
    out_ += sizeof x;
    ++index_;
  }

  // An integer of the tensor's type in [lo, hi]; the messages of each way a value can miss.
  template <typename T>
  void put_integer() {
    constexpr auto lo = std::numeric_limits<T>::min();
    constexpr auto hi = std::numeric_limits<T>::max();
    od::number n;
    if (number_.get_number().get(n))
      throw InputError(at(), "is " + token_text(number_) + ", not a number");
    switch (n.get_number_type()) {
      case od::number_type::floating_point_number:
        throw InputError(at(), "is " + token_text(number_) + ", " + dt_ + " needs an integer");
      case od::number_type::unsigned_integer:  // 2^63 and above
        if constexpr (std::is_same_v<T, std::uint64_t>) return put<T>(n.get_uint64());
        throw InputError(at(), token_text(number_) + " does not fit " + dt_);
      case od::number_type::signed_integer: {
        const std::int64_t i = n.get_int64();
        if (std::is_unsigned_v<T> && i < 0)
          throw InputError(at(), "is negative, " + dt_ + " is unsigned");
        if constexpr (!std::is_same_v<T, std::int64_t> && !std::is_same_v<T, std::uint64_t>) {
          if (i < static_cast<std::int64_t>(lo) || i > static_cast<std::int64_t>(hi))
            throw InputError(at(), token_text(number_) + " does not fit " + dt_);
        }
        return put<T>(static_cast<T>(i));
      }
    }
  }

  void scalar(od::value& v) {
    switch (kind_) {
      case Kind::f32:
      case Kind::f64: {
        double d;
        if (v.get_double().get(d)) {
          if (ok(v.type()) == od::json_type::number) malformed(simdjson::NUMBER_ERROR);
          throw InputError(at(), "is " + token_text(v) + ", not a number");
        }
        if (kind_ == Kind::f32)
          put<float>(static_cast<float>(d));
        else
          put<double>(d);
        return;
      }
      case Kind::boolean: {
        bool b;
        if (v.get_bool().get(b))
          throw InputError(at(), "is " + token_text(v) + ", BOOL needs true/false");
        put<std::uint8_t>(b ? 1 : 0);
        return;
      }
      default:
        break;
    }
    number_ = v;
    switch (kind_) {
      case Kind::i8:
        return put_integer<std::int8_t>();
      case Kind::i16:
        return put_integer<std::int16_t>();
      case Kind::i32:
        return put_integer<std::int32_t>();
      case Kind::i64:
        return put_integer<std::int64_t>();
      case Kind::u8:
        return put_integer<std::uint8_t>();
      case Kind::u16:
        return put_integer<std::uint16_t>();
      case Kind::u32:
        return put_integer<std::uint32_t>();
      case Kind::u64:
        return put_integer<std::uint64_t>();
      default:
        return;
    }
  }

  Kind kind_;
  const std::string& dt_;
  const std::string& where_;
  char* out_;
  std::int64_t index_ = 0;
  od::value number_;
};

}  // namespace dype::rt::daemon::json_walk
