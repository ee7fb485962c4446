#include "hw/cuda/cuda_nvml.h"

#include <dlfcn.h>

namespace dype::hw {

namespace {
// The few NVML entry points used, declared here (nvml.h is not part of the toolkit install).
using nvmlReturn = int;  // NVML_SUCCESS = 0
using nvmlDevice = void*;
using InitFn = nvmlReturn (*)();
using ShutdownFn = nvmlReturn (*)();
using HandleFn = nvmlReturn (*)(const char*, nvmlDevice*);
using EnergyFn = nvmlReturn (*)(nvmlDevice, unsigned long long*);  // millijoules
using PowerFn = nvmlReturn (*)(nvmlDevice, unsigned*);             // milliwatts
using LinkFn = nvmlReturn (*)(nvmlDevice, unsigned*);
}  // namespace

struct Nvml::Api {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  HandleFn handle = nullptr;
  EnergyFn energy = nullptr;
  PowerFn power = nullptr;
  PowerFn power_limit = nullptr;
  LinkFn link_gen = nullptr;
  LinkFn link_width = nullptr;
  std::optional<nvmlDevice> device(const std::string& pci_bus_id) const {
    nvmlDevice d = nullptr;
    if (handle(pci_bus_id.c_str(), &d) != 0) return std::nullopt;
    return d;
  }
};

std::shared_ptr<Nvml> Nvml::load(std::string* why, const char* library) {
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = std::string("cannot load ") + library + ": " + dlerror();
    return nullptr;
  }
  std::shared_ptr<Nvml> n(new Nvml());
  n->lib_ = lib;
  n->api_ = std::make_unique<Api>();
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  n->api_->init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  n->api_->shutdown = reinterpret_cast<ShutdownFn>(sym("nvmlShutdown"));
  n->api_->handle = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  n->api_->energy = reinterpret_cast<EnergyFn>(sym("nvmlDeviceGetTotalEnergyConsumption"));
  n->api_->power = reinterpret_cast<PowerFn>(sym("nvmlDeviceGetPowerUsage"));
  n->api_->power_limit = reinterpret_cast<PowerFn>(sym("nvmlDeviceGetEnforcedPowerLimit"));
  n->api_->link_gen = reinterpret_cast<LinkFn>(sym("nvmlDeviceGetCurrPcieLinkGeneration"));
  n->api_->link_width = reinterpret_cast<LinkFn>(sym("nvmlDeviceGetCurrPcieLinkWidth"));
  if (!n->api_->init || !n->api_->shutdown || !n->api_->handle) {
    if (why) *why = std::string(library) + " lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2";
    n->api_->shutdown = nullptr;  // never initialised: nothing to shut down
    return nullptr;
  }
  if (const int rc = n->api_->init(); rc != 0) {
    if (why) *why = "nvmlInit_v2 failed with code " + std::to_string(rc);
    n->api_->shutdown = nullptr;
    return nullptr;
  }
  return n;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (lib_) dlclose(lib_);
}

std::optional<double> Nvml::total_energy_j(const std::string& pci_bus_id) const {
  if (!api_->energy) return std::nullopt;
  auto d = api_->device(pci_bus_id);
  unsigned long long mj = 0;
  if (!d || api_->energy(*d, &mj) != 0) return std::nullopt;
  return static_cast<double>(mj) * 1e-3;
}

std::optional<double> Nvml::power_w(const std::string& pci_bus_id) const {
  if (!api_->power) return std::nullopt;
  auto d = api_->device(pci_bus_id);
  unsigned mw = 0;
  if (!d || api_->power(*d, &mw) != 0) return std::nullopt;
  return mw * 1e-3;
}

std::optional<double> Nvml::power_limit_w(const std::string& pci_bus_id) const {
  if (!api_->power_limit) return std::nullopt;
  auto d = api_->device(pci_bus_id);
  unsigned mw = 0;
  if (!d || api_->power_limit(*d, &mw) != 0 || mw == 0) return std::nullopt;
  return mw * 1e-3;
}

std::optional<std::pair<int, int>> Nvml::pcie_link(const std::string& pci_bus_id) const {
  if (!api_->link_gen || !api_->link_width) return std::nullopt;
  auto d = api_->device(pci_bus_id);
  unsigned gen = 0, width = 0;
  if (!d || api_->link_gen(*d, &gen) != 0 || api_->link_width(*d, &width) != 0) return std::nullopt;
  return std::pair<int, int>(static_cast<int>(gen), static_cast<int>(width));
}

}  // namespace dype::hw
