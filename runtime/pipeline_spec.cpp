#include "runtime/pipeline_spec.h"

namespace dype::rt {

std::string device_names(const PipelineStage& stage) {
  if (stage.remote) return stage.remote->where();
  std::string s;
  for (const hw::Device* d : stage.devices) {
    if (!s.empty()) s += "+";
    s += d->name();
  }
  return s;
}

std::string describe(const PipelineSpec& spec) {
  std::string s;
  for (const auto& st : spec.stages) {
    if (!s.empty()) s += " | ";
    s += std::to_string(st.first) + "-" + std::to_string(st.last) + ":" + device_names(st);
  }
  return s;
}

}  // namespace dype::rt
