#pragma once
// ConfigNode: a YAML node that knows its file and key path, so every config error can say exactly
// where it is ("systems/x.yaml: devices[2].link.lanes: must be one of 1,2,4,8,16, got 12").
// Mappings are checked for unknown keys (a typo must not be silently ignored).
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace dype::hw {

class ConfigNode {
 public:
  ConfigNode(YAML::Node node, std::string file, std::string path = "")
      : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}
  // Parses a file; a missing file or YAML syntax error becomes an InputError naming file:line.
  static ConfigNode load_file(const std::string& path, const std::string& display_name = "");
  // Parses YAML text; a syntax error becomes an InputError naming file_name:line.
  static ConfigNode parse(const std::string& text, const std::string& file_name);

  const YAML::Node& yaml() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  std::size_t size() const { return node_.size(); }
  bool has(std::string_view key) const;

  ConfigNode child(std::string_view key) const;  // throws when absent
  std::optional<ConfigNode> optional_child(std::string_view key) const;
  ConfigNode at(std::size_t index) const;

  // Throws InputError naming the key path when a key is not in `allowed`.
  void expect_keys(std::initializer_list<std::string_view> allowed) const;
  void expect_map() const;
  void expect_sequence() const;

  std::string as_string() const;
  double as_double() const;
  std::int64_t as_int() const;
  bool as_bool() const;

  std::string get_string(std::string_view key) const { return child(key).as_string(); }
  std::string get_string(std::string_view key, std::string fallback) const;
  double get_double(std::string_view key) const { return child(key).as_double(); }
  double get_double(std::string_view key, double fallback) const;
  std::int64_t get_int(std::string_view key) const { return child(key).as_int(); }
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  // A number that must be > 0 (or >= 0 with allow_zero).
  double get_positive(std::string_view key, bool allow_zero = false) const;
  double get_positive(std::string_view key, double fallback, bool allow_zero = false) const;

  [[noreturn]] void fail(const std::string& problem) const;
  std::string where() const;  // "file: path" (or "file" at the root)

 private:
  std::string child_path(std::string_view key) const;
  YAML::Node node_;
  std::string file_;
  std::string path_;
};

}  // namespace dype::hw
