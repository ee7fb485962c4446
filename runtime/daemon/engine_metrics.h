#pragma once
// The runtime's Prometheus lines (text format 0.0.4) for the served models: plan epoch and label,
// re-plans by cause, engine results, swap pauses, modelled makespan and energy, per-device energy,
// per-device busy time and utilisation, per-stage busy ratio and queue depth. EngineService::metrics_text() returns them and Metrics
// (metrics.h) appends them after the daemon's own request figures:
//
//   metrics.render(render_engine_metrics(engines, "balanced", system) + "dype_ready 1\n");
#include <span>
#include <string>

#include "hw/system.h"
#include "runtime/utilisation_observer.h"
#include "runtime/daemon/served_engine.h"

namespace dype::rt::daemon {

// mode: the objective every engine plans for (labelled on dype_plan_info). utilisation: the
// devices' busy time (device_busy_seconds_total, device_utilization), when given.
std::string render_engine_metrics(std::span<const ServedEngine> engines, const std::string& mode,
                                  const hw::System& system, const UtilisationObserver* utilisation = nullptr);

}  // namespace dype::rt::daemon
