#pragma once
// A model repository (Triton's layout, adapted): one folder per model under each root,
//   ROOT/<name>/config.yaml
//   ROOT/<name>/model.safetensors                 (version 1), or
//   ROOT/<name>/<version>/model.safetensors       (numeric folders; the highest is served unless
//                                                  config.yaml pins `version`)
// Model names are folder names ([A-Za-z0-9_.-], they appear in URLs). Loading reads the config
// strictly and every weight from the file (runtime/repository/model_weights.h); any problem is an
// InputError naming the folder or file and what is wrong, and leaves nothing half-loaded.
//
//   rt::ModelRepository repo({"models"});
//   for (const std::string& name : repo.index()) {
//     rt::RepositoryModel m = repo.load(name);   // m.model, m.version, m.config
//   }
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/repository/model_config.h"

namespace dype::rt {

struct RepositoryModel {
  std::string name;
  std::int64_t version = 1;
  std::string weights_file;
  std::string fingerprint;  // of the model folder when it was read (see ModelRepository::fingerprint)
  ModelConfig config;
  std::shared_ptr<const Model> model;
};

class ModelRepository {
 public:
  // Each root must be a readable folder (InputError otherwise); a model name found under two
  // roots is refused naming both.
  explicit ModelRepository(std::vector<std::string> roots);

  const std::vector<std::string>& roots() const { return roots_; }
  // The model folders (those holding a config.yaml), sorted by name.
  std::vector<std::string> index() const;
  // The folder of model `name`; InputError when there is none.
  std::string folder(const std::string& name) const;
  // Every file of the model's folder with its size and modification time: it changes when a
  // file is added, removed or rewritten (what --model-control-mode poll watches).
  std::string fingerprint(const std::string& name) const;
  // Reads the config (or `config_yaml`, text that replaces the folder's config.yaml), picks the
  // version and loads the weights.
  RepositoryModel load(const std::string& name, const std::optional<std::string>& config_yaml = std::nullopt) const;

 private:
  std::vector<std::string> roots_;
};

}  // namespace dype::rt
