#include "hw/hip/hip_smi.h"

#include <dlfcn.h>

#include "kernels/hip/launch_plan.h"

namespace dype::hw {

namespace {
// The ROCm SMI entry points used (rocm_smi.h, ROCm 5.2). rsmi_status_t is a 32-bit enum.
using rsmi_status = std::uint32_t;  // RSMI_STATUS_SUCCESS = 0
using InitFn = rsmi_status (*)(std::uint64_t);
using ShutdownFn = rsmi_status (*)();
using CountFn = rsmi_status (*)(std::uint32_t*);
using PciIdFn = rsmi_status (*)(std::uint32_t, std::uint64_t*);
using EnergyFn = rsmi_status (*)(std::uint32_t, std::uint64_t*, float*, std::uint64_t*);
using PowerFn = rsmi_status (*)(std::uint32_t, std::uint32_t, std::uint64_t*);  // microwatts
using StringFn = rsmi_status (*)(rsmi_status, const char**);

std::string describe(StringFn fn, rsmi_status rc) {
  const char* text = nullptr;
  std::string s = "code " + std::to_string(rc);
  if (fn && fn(rc, &text) == 0 && text) s += " (" + std::string(text) + ")";
  s += ", ";
  s += kernels::hip::to_string(kernels::hip::classify_rsmi_status(rc));
  return s;
}
}  // namespace

struct RocmSmi::Api {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  CountFn count = nullptr;
  PciIdFn pci_id = nullptr;
  EnergyFn energy = nullptr;
  PowerFn power = nullptr;
  StringFn status_string = nullptr;
};

std::shared_ptr<RocmSmi> RocmSmi::load(std::string* why, const char* library) {
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = std::string("cannot load ") + library + ": " + dlerror();
    return nullptr;
  }
  std::shared_ptr<RocmSmi> s(new RocmSmi());
  s->lib_ = lib;
  s->api_ = std::make_unique<Api>();
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  s->api_->init = reinterpret_cast<InitFn>(sym("rsmi_init"));
  s->api_->shutdown = reinterpret_cast<ShutdownFn>(sym("rsmi_shut_down"));
  s->api_->count = reinterpret_cast<CountFn>(sym("rsmi_num_monitor_devices"));
  s->api_->pci_id = reinterpret_cast<PciIdFn>(sym("rsmi_dev_pci_id_get"));
  s->api_->energy = reinterpret_cast<EnergyFn>(sym("rsmi_dev_energy_count_get"));
  s->api_->power = reinterpret_cast<PowerFn>(sym("rsmi_dev_power_ave_get"));
  s->api_->status_string = reinterpret_cast<StringFn>(sym("rsmi_status_string"));
  auto& api = *s->api_;
  if (!api.init || !api.shutdown || !api.count || !api.pci_id) {
    if (why) *why = std::string(library) + " lacks rsmi_init/rsmi_num_monitor_devices/rsmi_dev_pci_id_get";
    api.shutdown = nullptr;  // never initialised: nothing to shut down
    return nullptr;
  }
  if (const rsmi_status rc = api.init(0); rc != 0) {
    if (why) *why = "rsmi_init failed with " + describe(api.status_string, rc);
    api.shutdown = nullptr;
    return nullptr;
  }
  if (const rsmi_status rc = api.count(&s->devices_); rc != 0) {
    if (why) *why = "rsmi_num_monitor_devices failed with " + describe(api.status_string, rc);
    return nullptr;
  }
  if (s->devices_ == 0) {
    if (why) *why = "ROCm SMI monitors no GPU (amdgpu driver not loaded?)";
    return nullptr;
  }
  return s;
}

RocmSmi::~RocmSmi() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (lib_) dlclose(lib_);
}

std::optional<std::uint32_t> RocmSmi::index_of(const std::string& pci_bus_id) const {
  const auto want = kernels::hip::pci_bus_id_to_bdfid(pci_bus_id);
  if (!want) return std::nullopt;
  for (std::uint32_t i = 0; i < devices_; ++i) {
    std::uint64_t bdf = 0;
    if (api_->pci_id(i, &bdf) == 0 && bdf == *want) return i;
  }
  return std::nullopt;
}

std::optional<double> RocmSmi::total_energy_j(const std::string& pci_bus_id) const {
  if (!api_->energy) return std::nullopt;
  const auto i = index_of(pci_bus_id);
  std::uint64_t counter = 0, timestamp_ns = 0;
  float resolution_uj = 0.0f;
  if (!i || api_->energy(*i, &counter, &resolution_uj, &timestamp_ns) != 0) return std::nullopt;
  return kernels::hip::energy_counter_to_j(counter, resolution_uj);
}

std::optional<double> RocmSmi::power_w(const std::string& pci_bus_id) const {
  if (!api_->power) return std::nullopt;
  const auto i = index_of(pci_bus_id);
  std::uint64_t uw = 0;
  if (!i || api_->power(*i, 0, &uw) != 0) return std::nullopt;
  return static_cast<double>(uw) * 1e-6;
}

}  // namespace dype::hw
