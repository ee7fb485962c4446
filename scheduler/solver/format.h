#pragma once
// Figures as text for the solvers' explanations and infeasibility messages.
#include <cstdio>
#include <string>

#include "scheduler/cost_tables.h"

namespace dype::sched::detail {

// "0.2337 s period", or "infeasible" for kInf.
inline std::string fmt(double v, const char* unit) {
  char buf[64];
  if (!(v < kInf)) return "infeasible";
  std::snprintf(buf, sizeof buf, "%.4g %s", v, unit);
  return buf;
}

// 100 (v - ref) / base, base defaulting to ref: "42.50%".
inline std::string percent(double v, double ref, double base = 0.0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * (v - ref) / (base != 0.0 ? base : ref));
  return buf;
}

}  // namespace dype::sched::detail
