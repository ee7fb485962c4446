#include "runtime/daemon/admin/operator_state.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/daemon/admin/atomic_file.h"

namespace dype::rt::daemon {

namespace fs = std::filesystem;
using json = nlohmann::json;

OperatorStateFile::OperatorStateFile(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/state.json") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) throw InputError("--state-dir " + dir_, "cannot be created: " + ec.message());
  if (::access(dir_.c_str(), W_OK) != 0) throw InputError("--state-dir " + dir_, "is not writable");
}

OperatorState OperatorStateFile::load() const {
  OperatorState s;
  std::ifstream in(path_);
  if (!in) return s;
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw InputError(path_, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw InputError(path_, "must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (k == "mode") {
      if (!v.is_string()) throw InputError(path_ + ": mode", "must be a string");
      s.mode = v.get<std::string>();
    } else if (k == "drained") {
      if (!v.is_array()) throw InputError(path_ + ": drained", "must be a list of device names");
      for (const json& d : v) {
        if (!d.is_string()) throw InputError(path_ + ": drained", "must be a list of device names");
        s.drained.insert(d.get<std::string>());
      }
    } else if (k == "bitstreams") {
      if (!v.is_object()) throw InputError(path_ + ": bitstreams", "must map devices to manifest paths");
      for (const auto& [d, p] : v.items()) {
        if (!p.is_string()) throw InputError(path_ + ": bitstreams." + d, "must be a manifest path");
        s.bitstreams[d] = p.get<std::string>();
      }
    } else {
      throw InputError(path_ + ": " + k, "unknown key");
    }
  }
  return s;
}

void OperatorStateFile::save(const OperatorState& s) const {
  json j = json::object();
  if (s.mode) j["mode"] = *s.mode;
  j["drained"] = s.drained;
  j["bitstreams"] = s.bitstreams;
  write_file_atomically(path_, j.dump(2) + "\n");
}

}  // namespace dype::rt::daemon
