#pragma once
// DeviceAdmin: operator changes to devices (drain, undrain, bitstream load and unload), applied to
// every served model's engine at once since they share the devices. EngineService owns one and
// answers the admin API through it (EngineService::set_device_drained, load_bitstream, ...).
//
//   DeviceAdmin admin(system, {{"gcn", &gcn_engine}, {"gin", &gin_engine}});
//   json j = admin.load_bitstream("fpga0", "configs/bitstreams/u280-sextans-gemm.yaml");
//   json c = admin.choose_images(gcn_planner, characteristics, "energy", 1000, true);
//
// Calls are serialised. FPGAs holding different images are planned as different kinds
// (planning_kinds.h), so every FPGA with an image stays in service. A change that fails part-way
// is undone (the previous images reloaded, every engine's plan and drained set restored) and
// throws RolledBack.
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/system.h"
#include "runtime/host_directory.h"
#include "runtime/planning/planner.h"
#include "runtime/daemon/served_engine.h"

namespace dype::rt::daemon {

class DeviceAdmin {
 public:
  // `hosts`: where a multi-host system's other hosts are now (devices() gives their addresses);
  // may be null on one host.
  DeviceAdmin(hw::System& system, std::vector<ServedEngine> engines, std::shared_ptr<const HostDirectory> hosts = nullptr)
      : system_(system), engines_(std::move(engines)), hosts_(std::move(hosts)) {}

  // Drain: re-plan without the device; requests already in a pipeline that uses it finish there.
  // NotFound for an unknown device; RolledBack (device still in service) when no plan is left.
  nlohmann::json set_device_drained(const std::string& device, bool drained);
  // The same for several devices at once (a host's): one re-plan without all of them, so no plan in
  // between uses some; `what` names them in the re-plan's detail and errors.
  nlohmann::json set_devices_drained(const std::vector<std::string>& devices, bool drained, const std::string& what);
  // Bitstream swap on an emulated FPGA: drain it, load the manifest (its kernels and performance
  // model; the modelled reconfiguration time passes on the device's clock), let it back in and
  // re-plan. InputError for a bad manifest or one built for another board.
  nlohmann::json load_bitstream(const std::string& device, const std::string& manifest_path);
  // Drains the FPGA and removes its bitstream; it stays out of plans until a bitstream is loaded.
  nlohmann::json unload_bitstream(const std::string& device);
  // Image choice (image_planner.h) for one model: the images its best plan wants, once the reloads
  // pay for themselves within `horizon` requests. With `apply`, the FPGAs whose image changes are
  // drained together, reloaded, let back in, and every engine re-planned (all undone when one
  // load fails); without it, only the proposal. FPGAs the model's plans leave out (drained,
  // failed) keep their images.
  nlohmann::json choose_images(const SchedPlanner& planner, const Engine::PlanningState& state, double horizon,
                               bool apply);
  // Every device: kind, backend, bitstream, drained, energy.
  nlohmann::json devices() const;

  // Models loaded or unloaded while serving. admit: a new engine leaves out what every engine
  // leaves out (operator-drained devices) before it takes requests; throws
  // when that leaves it no plan. set_engines: the engines device changes apply to from now on
  // (waits for a device change in progress).
  void admit(Engine& engine, const std::string& model);
  void set_engines(std::vector<ServedEngine> engines);

 private:
  hw::Device& reconfigurable_fpga(const std::string& device) const;
  // Loads each (FPGA, image): drains them all, loads, lets them back in; undoes everything and
  // throws RolledBack when a step fails. Returns each load's time and source.
  struct Load {
    hw::Device* fpga = nullptr;
    hw::Bitstream image;
  };
  nlohmann::json load_images(const std::vector<Load>& loads, const std::string& detail);
  // Makes every engine's drained set `left_out` (drains first, then undrains); throws on the
  // first engine left without a plan (the caller rolls back).
  void apply_left_out(const std::set<std::string>& left_out, const std::string& cause, const std::string& detail);
  // Every engine back to the pipeline and drained set it had; best effort (used on failure).
  struct Snapshot {
    std::vector<PipelineSpec> specs;
    std::vector<std::string> labels;
    std::vector<std::set<std::string>> drained;
  };
  Snapshot snapshot() const;
  void restore(const Snapshot& s, const std::string& detail);
  nlohmann::json plan_labels() const;

  hw::System& system_;
  std::vector<ServedEngine> engines_;
  std::shared_ptr<const HostDirectory> hosts_;
  std::mutex mu_;                           // device changes, one at a time
  std::set<std::string> operator_drained_;  // by set_device_drained / unload_bitstream
};

}  // namespace dype::rt::daemon
