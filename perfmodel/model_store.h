#pragma once
// Persistent kernel models, one JSON file per device model under configs/perfmodels/
// (<device_model>.json), holding one model per kernel. Loading validates everything: a file that
// is missing, is not valid JSON, belongs to another device, names an unknown feature set, or has a
// non-finite / wrongly sized coefficient vector raises dype::InputError naming the file and the
// JSON key; a model is never silently wrong. There is no fallback inside the store: callers that
// can live without a model (the scheduler skipping a device kind) catch the error and say so.
//
// File layout (format "dype-perfmodel", version 1):
//   { "format": "dype-perfmodel", "version": 1, "device_model": "amd-mi210",
//     "device_class": "gpu", "provenance": "modelled" | "measured", "host": "...",
//     "created": "2025-...", "models": { "spmm": { "feature_set": "spmm.gpu.eq7",
//       "features": [...names], "coefficients": [...], "ranges": [[min,max],...],
//       "params": {...}, "stats": {...}, "refinement": {...}, "samples": [[m,k,n,nnz,seq,win,
//       heads,head_dim,skew,seconds,holdout],...] } } }
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "perfmodel/model.h"

namespace dype::perf {

class ModelStore {
 public:
  std::string device_model;             // e.g. "amd-mi210", "cpu-xeon-2c"
  DeviceClass device_class = DeviceClass::cpu;
  std::string provenance = "measured";  // "modelled" when the device was emulated
  // What a timed sample is: "wall", "cpu_time" (process CPU time / threads, contention-free) or
  // "device" (the device's event time; modelled on emulated devices).
  std::string time_basis = "wall";
  std::string host;                     // where it was profiled
  // Machine load while profiling ("load average 0.1 -> 0.3, 2 hardware threads"): measured times
  // on a busy machine include contention, so a reader can tell a quiet profile from a noisy one.
  std::string conditions;
  std::string created;                  // ISO-8601 UTC
  std::map<OpKind, KernelModel> models;

  // nullptr when the store has no model for the kernel.
  const KernelModel* find(OpKind kind) const;
  KernelModel* find(OpKind kind);
  // Throws dype::Error naming the device and kernel when missing.
  const KernelModel& at(OpKind kind) const;
  KernelModel& at(OpKind kind);

  // Reads and validates a store. When expected_device_model is non-empty, a file for another
  // device is rejected.
  static ModelStore load(const std::filesystem::path& file,
                         std::string_view expected_device_model = {});
  static ModelStore parse(std::string_view json_text, const std::string& where,
                          std::string_view expected_device_model = {});
  void save(const std::filesystem::path& file) const;  // atomic (write temp + rename)
  std::string to_json_text() const;

  // configs/perfmodels/<device_model>.json under `root` (the repo root or an install prefix).
  static std::filesystem::path default_path(const std::filesystem::path& root,
                                            std::string_view device_model);
};

}  // namespace dype::perf
