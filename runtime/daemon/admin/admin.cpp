#include "runtime/daemon/admin/admin.h"

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/daemon/errors.h"
#include "runtime/secret_compare.h"

namespace dype::rt::daemon {

using json = nlohmann::json;

AdminApi::AdminApi(InferenceService& service, AdminHooks hooks, std::string token, std::string bitstream_dir)
    : service_(service), hooks_(std::move(hooks)), token_(std::move(token)), bitstream_dir_(std::move(bitstream_dir)) {}

std::string read_token_file(const std::string& path, const std::string& what) {
  std::ifstream f(path);
  if (!f) throw InputError(path, "cannot read the " + what + " token file");
  std::string token;
  std::getline(f, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) throw InputError(path, what + " token file is empty");
  return token;
}

bool bearer_matches(const std::string& authorization, const std::string& token) {
  return !token.empty() && same_secret(authorization, "Bearer " + token);
}

void check_infer_token(const std::string& authorization, const std::string& token) {
  if (!token.empty() && !bearer_matches(authorization, token))
    throw Unauthorized("missing or wrong inference token (Authorization: Bearer <token>)");
}

void AdminApi::authorize(const std::string& authorization) const {
  if (!bearer_matches(authorization, token_))
    throw Unauthorized("missing or wrong admin token (Authorization: Bearer <token>)");
}

std::vector<std::string> AdminApi::models_of(const std::optional<std::string>& model) const {
  std::vector<std::string> names;
  if (model && !model->empty()) {
    service_.model(*model);  // NotFound
    names.push_back(*model);
  } else {
    for (const ModelInfo& m : service_.models()) names.push_back(m.name);
  }
  return names;
}

json AdminApi::plan(const std::optional<std::string>& model) {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (const std::string& m : models_of(model)) out.push_back(service_.plan(m));
  return {{"mode", service_.mode()}, {"plans", out}};
}

json AdminApi::set_mode(const std::string& mode) {
  std::lock_guard lock(mu_);
  service_.set_mode(mode);
  state_.mode = service_.mode();
  save_state();
  json plans = json::object();
  for (const ModelInfo& m : service_.models()) plans[m.name] = service_.plan(m.name)["label"];
  return {{"mode", service_.mode()}, {"plans", plans}};
}

json AdminApi::pareto(const std::optional<std::string>& model) {
  std::lock_guard lock(mu_);
  if (!hooks_.pareto) throw NotSupported("the Pareto front is not available in this server");
  json out = json::array();
  for (const std::string& m : models_of(model)) out.push_back(hooks_.pareto(m));
  return {{"fronts", out}};
}

json AdminApi::drain_device(const std::string& device, bool drain) {
  std::lock_guard lock(mu_);
  if (!hooks_.drain_device) throw NotSupported("device drain is not supported by this runtime");
  json out = hooks_.drain_device(device, drain);
  if (drain) state_.drained.insert(device);
  else state_.drained.erase(device);
  save_state();
  return out;
}

json AdminApi::hosts() {
  std::lock_guard lock(mu_);
  if (!hooks_.hosts) throw NotSupported("this server runs on one host");
  return hooks_.hosts();
}

json AdminApi::drain_host(const std::string& host, bool drain) {
  std::lock_guard lock(mu_);
  if (!hooks_.host_devices || !hooks_.drain_devices) throw NotSupported("this server runs on one host");
  const std::vector<std::string> devices = hooks_.host_devices(host);
  json out = hooks_.drain_devices(devices, drain, "host " + host);
  for (const std::string& d : devices) {
    if (drain) state_.drained.insert(d);
    else state_.drained.erase(d);
  }
  save_state();
  out["host"] = host;
  return out;
}

json AdminApi::join_host(const std::string& authorization, const std::string& host, const std::string& address,
                         const json& devices) {
  if (join_token_.empty())
    throw Unauthorized("this coordinator takes no joins: start it with --stage-token-file, as its workers");
  if (!bearer_matches(authorization, join_token_)) throw Unauthorized("the join does not carry this deployment's stage token");
  if (!hooks_.join_host) throw NotSupported("this server runs on one host");
  return hooks_.join_host(host, address, devices);
}

json AdminApi::devices() {
  std::lock_guard lock(mu_);
  if (!hooks_.devices) throw NotSupported("device listing is not supported by this runtime");
  return hooks_.devices();
}

json AdminApi::status() {
  if (!hooks_.status || !hooks_.status_devices) throw NotSupported("the status page is not supported by this runtime");
  json out = hooks_.status();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard copy(status_mu_);
  // Read again at most once a second (every open page polls), and only between admin calls.
  if (status_devices_.is_null() || now - status_devices_at_ >= std::chrono::seconds(1)) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (lock.owns_lock()) {
      status_devices_ = hooks_.status_devices();
      status_devices_at_ = now;
    }
  }
  if (status_devices_.is_null()) {
    out["devices"] = json::array();  // an admin call has held them since start: not read yet
    out["devices_age_s"] = nullptr;
    return out;
  }
  for (const auto& [k, v] : status_devices_.items()) out[k] = v;
  out["devices_age_s"] = std::chrono::duration<double>(now - status_devices_at_).count();
  return out;
}

json AdminApi::load_bitstream(const std::string& device, const std::string& path) {
  const std::string file = confine_bitstream_path(path);  // refuse before taking the lock
  std::lock_guard lock(mu_);
  if (!hooks_.load_bitstream) throw NotSupported("bitstream loading is not supported by this runtime");
  json out = hooks_.load_bitstream(device, file);
  state_.bitstreams[device] = file;
  state_.drained.erase(device);  // a loaded image puts a drained FPGA back in service
  save_state();
  return out;
}

json AdminApi::unload_bitstream(const std::string& device) {
  std::lock_guard lock(mu_);
  if (!hooks_.unload_bitstream) throw NotSupported("bitstream unloading is not supported by this runtime");
  json out = hooks_.unload_bitstream(device);
  state_.bitstreams[device] = "";
  save_state();
  return out;
}

json AdminApi::choose_images(const std::optional<std::string>& model, std::optional<double> horizon, bool apply) {
  std::lock_guard lock(mu_);
  if (!hooks_.choose_images) throw NotSupported("image choice is not supported by this runtime");
  const std::vector<std::string> models = models_of(model);
  if (models.size() != 1)
    throw InputError("model", "names the model to choose images for (" + std::to_string(models.size()) + " are served)");
  json out = hooks_.choose_images(models.front(), horizon.value_or(kDefaultReloadHorizon), apply);
  if (out.value("applied", false)) {
    for (const json& l : out["loads"]) {
      state_.bitstreams[l["device"].get<std::string>()] = l["file"].get<std::string>();
      state_.drained.erase(l["device"].get<std::string>());
    }
    save_state();
  }
  return out;
}

json AdminApi::repository_index() {
  std::lock_guard lock(mu_);
  if (!hooks_.repository_index) throw NotSupported("this server has no model repository");
  return hooks_.repository_index();
}

json AdminApi::load_model(const std::string& model, const std::optional<std::string>& config) {
  std::lock_guard lock(mu_);
  if (!hooks_.load_model) throw NotSupported("model loading is not supported by this runtime");
  return hooks_.load_model(model, config);
}

json AdminApi::unload_model(const std::string& model) {
  std::lock_guard lock(mu_);
  if (!hooks_.unload_model) throw NotSupported("model unloading is not supported by this runtime");
  return hooks_.unload_model(model);
}

void AdminApi::keep_state_in(std::shared_ptr<OperatorStateFile> file) {
  std::lock_guard lock(mu_);
  state_file_ = std::move(file);
}

void AdminApi::save_state() {
  if (state_file_) state_file_->save(state_);
}

std::vector<std::string> AdminApi::restore_state() {
  std::vector<std::string> report;
  OperatorState saved;
  {
    std::lock_guard lock(mu_);
    if (!state_file_) return report;
    saved = state_file_->load();
    // Each step below saves state_: starting from the whole saved state keeps the file whole if
    // the daemon dies part-way through restoring it (otherwise the first step would write a
    // state without the steps not yet taken).
    state_ = saved;
  }
  auto attempt = [&](const std::string& what, auto&& f, auto&& forget) {
    try {
      f();
      report.push_back(what);
    } catch (const std::exception& e) {
      report.push_back(what + " skipped: " + e.what());
      std::lock_guard lock(mu_);  // not in effect: not kept either
      forget();
      save_state();
    }
  };
  if (saved.mode) attempt("mode " + *saved.mode, [&] { set_mode(*saved.mode); }, [&] { state_.mode = service_.mode(); });
  for (const auto& [device, path] : saved.bitstreams) {
    auto forget = [&, d = device] { state_.bitstreams.erase(d); };
    if (path.empty()) attempt(device + ": bitstream unloaded", [&] { unload_bitstream(device); }, forget);
    else attempt(device + ": bitstream " + path, [&] { load_bitstream(device, path); }, forget);
  }
  for (const std::string& device : saved.drained)
    attempt(device + ": drained", [&] { drain_device(device, true); }, [&, d = device] { state_.drained.erase(d); });
  return report;
}

std::string AdminApi::confine_bitstream_path(const std::string& path) const {
  namespace fs = std::filesystem;
  if (bitstream_dir_.empty()) throw InputError("path", "no --bitstream-dir configured; bitstream loading is off");
  if (path.empty()) throw InputError("path", "is empty");
  // The filesystem sees the path up to a NUL only, so "ok.xclbin\0anything" would load ok.xclbin.
  if (path.find('\0') != std::string::npos) throw InputError("path", "contains a NUL byte");
  std::error_code ec;
  const fs::path root = fs::canonical(bitstream_dir_, ec);
  if (ec) throw InputError("--bitstream-dir", "'" + bitstream_dir_ + "' cannot be resolved: " + ec.message());
  const fs::path given(path);
  // canonical resolves symlinks too, so a link inside the dir pointing out of it is refused.
  const fs::path full = fs::weakly_canonical(given.is_absolute() ? given : root / given, ec);
  if (ec) throw InputError("path", "'" + path + "' cannot be resolved: " + ec.message());
  const fs::path rel = full.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..")
    throw InputError("path", "'" + path + "' is outside the bitstream dir " + root.string());
  if (!fs::is_regular_file(full, ec)) throw InputError("path", "'" + path + "' is not a file in " + root.string());
  return full.string();
}

}  // namespace dype::rt::daemon
