#include "runtime/repository/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "runtime/repository/model_weights.h"
#include "runtime/repository/safetensors.h"

namespace dype::rt {

namespace fs = std::filesystem;

namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

// name -> folder, over every root.
std::map<std::string, fs::path> scan(const std::vector<std::string>& roots) {
  std::map<std::string, fs::path> found;
  for (const std::string& root : roots) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
      if (!e.is_directory(ec) || !fs::exists(e.path() / "config.yaml", ec)) continue;
      const std::string name = e.path().filename().string();
      if (!valid_name(name)) {
        throw InputError(e.path().string(), "model folder names may hold only letters, digits, '_', '.' and '-'");
      }
      const auto [it, inserted] = found.emplace(name, e.path());
      if (!inserted) {
        throw InputError("model repository", "model '" + name + "' is in both " + it->second.string() + " and " +
                                                 e.path().string());
      }
    }
    if (ec) throw InputError("model repository " + root, "cannot be read: " + ec.message());
  }
  return found;
}

// Numeric version folders of a model folder; a non-numeric sub-folder is refused.
std::map<std::int64_t, fs::path> versions_in(const fs::path& dir) {
  std::map<std::int64_t, fs::path> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string v = e.path().filename().string();
    const bool digits = !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) throw InputError(e.path().string(), "version folder '" + v + "' is not a number");
    out.emplace(std::stoll(v), e.path());
  }
  if (ec) throw InputError(dir.string(), "cannot be read: " + ec.message());
  return out;
}

}  // namespace

ModelRepository::ModelRepository(std::vector<std::string> roots) : roots_(std::move(roots)) {
  if (roots_.empty()) throw InputError("model repository", "no folder given");
  for (const std::string& r : roots_) {
    std::error_code ec;
    if (!fs::is_directory(r, ec)) throw InputError("model repository " + r, "not a folder");
  }
  scan(roots_);  // names and duplicates are checked up front
}

std::vector<std::string> ModelRepository::index() const {
  std::vector<std::string> names;
  for (const auto& [name, dir] : scan(roots_)) names.push_back(name);
  return names;
}

std::string ModelRepository::folder(const std::string& name) const {
  const auto found = scan(roots_);
  const auto it = found.find(name);
  if (it == found.end()) throw InputError("model '" + name + "'", "not in the model repository");
  return it->second.string();
}

std::string ModelRepository::fingerprint(const std::string& name) const {
  const fs::path dir = folder(name);
  std::vector<std::string> lines;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto size = it->file_size(ec);
    const auto when = it->last_write_time(ec).time_since_epoch().count();
    lines.push_back(fs::relative(it->path(), dir, ec).string() + " " + std::to_string(size) + " " + std::to_string(when));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

RepositoryModel ModelRepository::load(const std::string& name, const std::optional<std::string>& config_yaml) const {
  const fs::path dir = folder(name);
  RepositoryModel m;
  m.name = name;
  m.fingerprint = fingerprint(name);
  m.config = config_yaml ? parse_model_config(*config_yaml, (dir / "config.yaml").string() + " (given with the load)")
                         : load_model_config((dir / "config.yaml").string());
  const auto versions = versions_in(dir);
  std::error_code ec;
  const bool top = fs::exists(dir / "model.safetensors", ec);
  fs::path weights;
  if (versions.empty()) {
    if (m.config.version && *m.config.version != 1) {
      throw InputError(m.config.file + ": version", "pins " + std::to_string(*m.config.version) + ", " + dir.string() +
                                                        " has no version folders");
    }
    if (!top) throw InputError(dir.string(), "has no weights (model.safetensors or <version>/model.safetensors)");
    weights = dir / "model.safetensors";
  } else {
    if (top) {
      throw InputError(dir.string(), "has both model.safetensors and version folders; keep one layout");
    }
    auto it = m.config.version ? versions.find(*m.config.version) : std::prev(versions.end());
    if (it == versions.end()) {
      throw InputError(m.config.file + ": version", "pins " + std::to_string(*m.config.version) + ", no such folder in " +
                                                        dir.string());
    }
    m.version = it->first;
    weights = it->second / "model.safetensors";
    if (!fs::exists(weights, ec)) throw InputError(it->second.string(), "has no model.safetensors");
  }
  m.weights_file = weights.string();
  const SafetensorsFile file = SafetensorsFile::open(m.weights_file);
  m.model = std::make_shared<const Model>(load_model_weights(m.config, file));
  return m;
}

}  // namespace dype::rt
