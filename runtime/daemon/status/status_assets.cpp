#include "runtime/daemon/status/status_assets.h"

namespace dype::rt::daemon {

const StatusAsset* find_status_asset(std::string_view name) {
  for (const StatusAsset& a : status_assets())
    if (a.name == name) return &a;
  return nullptr;
}

}  // namespace dype::rt::daemon
