#include "runtime/daemon/refined_models.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/daemon/admin/atomic_file.h"

namespace dype::rt::daemon {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kFormat[] = "dype-refined-models";

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The same fit: the same kernels with the same coefficients (a profile run again changes them).
bool same_fit(const perf::ModelStore& a, const perf::ModelStore& b) {
  if (a.models.size() != b.models.size()) return false;
  for (const auto& [kind, m] : a.models) {
    const perf::KernelModel* o = b.find(kind);
    if (!o || o->coefficients != m.coefficients) return false;
  }
  return true;
}

std::uint64_t updates(const perf::ModelStore& s) {
  std::uint64_t n = 0;
  for (const auto& [kind, m] : s.models) n += m.refinement.accepted;
  return n;
}

}  // namespace

std::string this_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "unknown";
  return buf;
}

RefinedModelsDir::RefinedModelsDir(const std::string& state_dir) : dir_(state_dir + "/refined") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) throw InputError("--state-dir " + state_dir, dir_ + " cannot be created: " + ec.message());
}

std::string RefinedModelsDir::path_of(const std::string& model) const {
  std::string name;
  for (const unsigned char c : model) {
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && !name.empty())) {
      name += static_cast<char>(c);
    } else {
      char esc[4];
      std::snprintf(esc, sizeof esc, "%%%02X", c);
      name += esc;
    }
  }
  return dir_ + "/" + name + ".json";
}

std::vector<perf::ModelStore> RefinedModelsDir::load(const std::string& model, std::vector<perf::ModelStore> base,
                                                     std::vector<std::string>& notes) const {
  const std::string path = path_of(model);
  std::ifstream in(path);
  if (!in) return base;
  std::stringstream text;
  text << in.rdbuf();
  std::vector<perf::ModelStore> saved;
  std::string host;
  try {
    const json j = json::parse(text.str());
    if (!j.is_object() || j.value("format", "") != kFormat)
      throw InputError(path, std::string("not a ") + kFormat + " file");
    host = j.at("host").get<std::string>();
    for (const json& s : j.at("stores")) saved.push_back(perf::ModelStore::parse(s.dump(), path));
  } catch (const std::exception& e) {
    notes.push_back("warning: " + model + ": refined models ignored: " + e.what());
    return base;
  }
  const std::string here = this_host_name();
  for (perf::ModelStore& b : base) {
    const perf::ModelStore* r = nullptr;
    for (const perf::ModelStore& s : saved)
      if (s.device_model == b.device_model) r = &s;
    if (!r) continue;
    if (!same_fit(*r, b)) {
      notes.push_back(model + ": " + b.device_model + " refinement ignored: the fitted model changed since it was saved");
      continue;
    }
    b = *r;
    if (host != here) {
      for (auto& [kind, m] : b.models) m.refinement.lower_trust();
      notes.push_back("warning: " + model + ": " + b.device_model + " refinement was made on host '" + host +
                      "', this is '" + here + "': restored with lowered trust");
    } else {
      notes.push_back(model + ": " + b.device_model + " refinement restored (" + std::to_string(updates(b)) +
                      " updates)");
    }
  }
  return base;
}

void RefinedModelsDir::save(const std::string& model, const std::vector<perf::ModelStore>& stores) const {
  json j{{"format", kFormat}, {"version", 1}, {"model", model}, {"host", this_host_name()}, {"saved", utc_now()}};
  json s = json::array();
  for (const perf::ModelStore& st : stores) s.push_back(json::parse(st.to_json_text()));
  j["stores"] = std::move(s);
  write_file_atomically(path_of(model), j.dump() + "\n");
}

}  // namespace dype::rt::daemon
