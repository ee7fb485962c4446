#include "hw/config_node.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace dype::hw {

ConfigNode ConfigNode::load_file(const std::string& path, const std::string& display_name) {
  const std::string shown = display_name.empty() ? path : display_name;
  std::ifstream in(path);
  if (!in) throw InputError(shown, "cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), shown);
}

ConfigNode ConfigNode::parse(const std::string& text, const std::string& file_name) {
  try {
    return ConfigNode(YAML::Load(text), file_name);
  } catch (const YAML::Exception& e) {
    throw InputError(file_name + ":" + std::to_string(e.mark.line + 1), "YAML syntax: " + e.msg);
  }
}

std::string ConfigNode::where() const { return path_.empty() ? file_ : file_ + ": " + path_; }

void ConfigNode::fail(const std::string& problem) const {
  // Root-level problems name the file only; nested ones add the key path.
  throw InputError(where(), problem);
}

std::string ConfigNode::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

bool ConfigNode::has(std::string_view key) const {
  return node_.IsMap() && node_[std::string(key)].IsDefined() && !node_[std::string(key)].IsNull();
}

ConfigNode ConfigNode::child(std::string_view key) const {
  expect_map();
  if (!has(key)) throw InputError(file_ + ": " + child_path(key), "required key missing");
  return ConfigNode(node_[std::string(key)], file_, child_path(key));
}

std::optional<ConfigNode> ConfigNode::optional_child(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return ConfigNode(node_[std::string(key)], file_, child_path(key));
}

ConfigNode ConfigNode::at(std::size_t index) const {
  expect_sequence();
  return ConfigNode(node_[index], file_, path_ + "[" + std::to_string(index) + "]");
}

void ConfigNode::expect_map() const {
  if (!node_.IsMap()) fail("must be a mapping");
}

void ConfigNode::expect_sequence() const {
  if (!node_.IsSequence()) fail("must be a list");
}

void ConfigNode::expect_keys(std::initializer_list<std::string_view> allowed) const {
  expect_map();
  for (const auto& kv : node_) {
    const std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (auto a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw InputError(file_ + ": " + child_path(key), "unknown key (allowed: " + list + ")");
    }
  }
}

std::string ConfigNode::as_string() const {
  if (!node_.IsScalar()) fail("must be a string");
  return node_.Scalar();
}

double ConfigNode::as_double() const {
  if (!node_.IsScalar()) fail("must be a number");
  const std::string& s = node_.Scalar();
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail("must be a number, got '" + s + "'");
  }
}

std::int64_t ConfigNode::as_int() const {
  if (!node_.IsScalar()) fail("must be an integer");
  const std::string& s = node_.Scalar();
  try {
    std::size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail("must be an integer, got '" + s + "'");
  }
}

bool ConfigNode::as_bool() const {
  if (!node_.IsScalar()) fail("must be true or false");
  const std::string& s = node_.Scalar();
  if (s == "true" || s == "True" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "False" || s == "no" || s == "off") return false;
  fail("must be true or false, got '" + s + "'");
}

std::string ConfigNode::get_string(std::string_view key, std::string fallback) const {
  return has(key) ? child(key).as_string() : fallback;
}
double ConfigNode::get_double(std::string_view key, double fallback) const {
  return has(key) ? child(key).as_double() : fallback;
}
std::int64_t ConfigNode::get_int(std::string_view key, std::int64_t fallback) const {
  return has(key) ? child(key).as_int() : fallback;
}
bool ConfigNode::get_bool(std::string_view key, bool fallback) const {
  return has(key) ? child(key).as_bool() : fallback;
}

double ConfigNode::get_positive(std::string_view key, bool allow_zero) const {
  const ConfigNode c = child(key);
  const double v = c.as_double();
  if (allow_zero ? v < 0 : v <= 0) {
    std::ostringstream o;
    o << "must be " << (allow_zero ? ">= 0" : "> 0") << ", got " << c.yaml().Scalar();
    c.fail(o.str());
  }
  return v;
}

double ConfigNode::get_positive(std::string_view key, double fallback, bool allow_zero) const {
  return has(key) ? get_positive(key, allow_zero) : fallback;
}

}  // namespace dype::hw
