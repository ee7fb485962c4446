#pragma once
// The admin API behind both front ends (HTTP /v2/dype/admin/*, gRPC dype.admin.DypeAdmin): token
// check, one call at a time, bitstream paths confined to --bitstream-dir. Every answer is a JSON
// document, the same over both protocols.
//
//   AdminApi admin(service, admin_hooks(engine_service), "s3cret", "configs/bitstreams");
//   admin.authorize(request_header("Authorization"));   // Unauthorized unless "Bearer s3cret"
//   json j = admin.load_bitstream("fpga0", "u280-sextans-gemm.yaml");
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/daemon/admin/operator_state.h"
#include "runtime/daemon/service.h"

namespace dype::rt::daemon {

// Device operations beyond InferenceService, provided by the host program (dype-serve wires
// EngineService's); an unset hook answers NotSupported (501 / UNIMPLEMENTED).
struct AdminHooks {
  std::function<nlohmann::json(const std::string& device, bool drain)> drain_device;
  std::function<nlohmann::json(const std::string& model)> pareto;
  std::function<nlohmann::json(const std::string& device, const std::string& path)> load_bitstream;
  std::function<nlohmann::json(const std::string& device)> unload_bitstream;
  std::function<nlohmann::json(const std::string& model, double horizon, bool apply)> choose_images;
  std::function<nlohmann::json()> devices;
  // The status page (status()): what may be read while an admin change runs, and what is read only
  // between admin calls (devices and their images, Pareto fronts: a change swaps them).
  std::function<nlohmann::json()> status;
  std::function<nlohmann::json()> status_devices;
  // The model repository extension: index, load (optionally with config.yaml text), unload.
  std::function<nlohmann::json()> repository_index;
  std::function<nlohmann::json(const std::string& model, const std::optional<std::string>& config)> load_model;
  std::function<nlohmann::json(const std::string& model)> unload_model;
  // Multi-host systems: the other hosts, the devices of one (NotFound when it is not one), and a
  // worker's join or heartbeat (host, its stage server's address, its devices).
  std::function<nlohmann::json()> hosts;
  std::function<std::vector<std::string>(const std::string& host)> host_devices;
  std::function<nlohmann::json(const std::vector<std::string>& devices, bool drain, const std::string& what)> drain_devices;
  std::function<nlohmann::json(const std::string& host, const std::string& address, const nlohmann::json& devices)>
      join_host;
};

// Whether `authorization` is "Bearer <token>", compared in constant time so the time taken does not
// reveal a matching prefix; false when `token` is empty.
bool bearer_matches(const std::string& authorization, const std::string& token);

// A token from its file's first line, trailing whitespace dropped; InputError naming the file
// ("cannot read the <what> token file", "<what> token file is empty").
std::string read_token_file(const std::string& path, const std::string& what);

// The inference token (dype-serve --infer-token-file): when set, infer and graph requests must
// carry it (Unauthorized otherwise); empty: inference is open.
void check_infer_token(const std::string& authorization, const std::string& token);

class AdminApi {
 public:
  // token empty: every call is refused (Unauthorized).
  AdminApi(InferenceService& service, AdminHooks hooks, std::string token, std::string bitstream_dir);

  // Unauthorized unless `authorization` is "Bearer <token>" (compared in constant time).
  void authorize(const std::string& authorization) const;

  nlohmann::json plan(const std::optional<std::string>& model);
  nlohmann::json set_mode(const std::string& mode);
  nlohmann::json pareto(const std::optional<std::string>& model);
  nlohmann::json drain_device(const std::string& device, bool drain);
  nlohmann::json devices();
  // `path` relative to the bitstream dir (or absolute inside it).
  nlohmann::json load_bitstream(const std::string& device, const std::string& path);
  nlohmann::json unload_bitstream(const std::string& device);
  // Image choice for `model` (optional when one model is served): the images its plan wants with
  // each reload amortised over `horizon` requests (default 1000), carried out when `apply`; the
  // loads are kept in the operator state like load_bitstream's.
  static constexpr double kDefaultReloadHorizon = 1000.0;
  nlohmann::json choose_images(const std::optional<std::string>& model, std::optional<double> horizon, bool apply);
  nlohmann::json hosts();
  // Drains (or lets back) every device of `host` at once (one re-plan; saved as drain_device's).
  nlohmann::json drain_host(const std::string& host, bool drain);
  // A worker host's join or heartbeat (dype-serve --join), authorised by the deployment's stage
  // token ("Bearer <token>", constant time), not the admin token: Unauthorized without it, and
  // always when this coordinator has none (set_join_token). Not serialised with the other calls:
  // heartbeats must not wait behind a long drain.
  void set_join_token(std::string token) { join_token_ = std::move(token); }
  nlohmann::json join_host(const std::string& authorization, const std::string& host, const std::string& address,
                           const nlohmann::json& devices);
  nlohmann::json repository_index();
  // What the status page shows (GET /v2/dype/status), for anyone the caller let through (no admin
  // token: the page is read-only). Never waits behind an admin call: while one runs, the devices
  // and Pareto fronts are the ones read after the last call (devices_age_s says how old).
  nlohmann::json status();
  nlohmann::json load_model(const std::string& model, const std::optional<std::string>& config);
  nlohmann::json unload_model(const std::string& model);

  // Operator state kept across restarts (operator_state.h): every successful mode change, drain,
  // undrain and bitstream load/unload is saved to `file` from now on.
  void keep_state_in(std::shared_ptr<OperatorStateFile> file);
  // Applies the saved state (mode, FPGA images, drained devices, in that order) at start; a part
  // that no longer applies (a device gone, a manifest moved) is skipped and reported, the rest is
  // applied. Returns one line per change or problem.
  std::vector<std::string> restore_state();

  // Resolves `path` inside the bitstream dir; InputError("path", ...) when it escapes the dir
  // (.., absolute paths, symlinks), does not exist, or no dir is configured.
  std::string confine_bitstream_path(const std::string& path) const;

 private:
  std::vector<std::string> models_of(const std::optional<std::string>& model) const;

  InferenceService& service_;
  AdminHooks hooks_;
  std::string token_;
  std::string bitstream_dir_;
  std::string join_token_;
  std::mutex mu_;  // admin calls run one at a time
  std::shared_ptr<OperatorStateFile> state_file_;
  OperatorState state_;  // what has been saved (under mu_)
  std::mutex status_mu_;  // the status page's copy of hooks_.status_devices(), and when it was read
  nlohmann::json status_devices_;
  std::chrono::steady_clock::time_point status_devices_at_{};
  void save_state();     // under mu_
};

}  // namespace dype::rt::daemon
