#pragma once
// The coordinator's side of a multi-host system (hw::SystemConfig::hosts): before a pipeline is
// built (EngineOptions::prepare_spec), each stage whose devices are on another host gets a
// UcxStageLink to that host's stage server (its address in the HostDirectory: the system file's,
// or what the host reported when it joined), which runs the stage's kernels on
// those devices (runtime/remote/stage_server.h). The stage keeps the planner's stand-in devices,
// so plans, predictions and drains name them as on one host.
//
//   auto attach = std::make_shared<remote::RemoteStageAttacher>(system.config(), hosts, ctx, model, "gcn");
//   engine_options.prepare_spec = [attach](rt::PipelineSpec& s) { (*attach)(s); };
#include <memory>
#include <string>

#include "hw/system_config.h"
#include "runtime/host_directory.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "runtime/remote/ucx_channel.h"

namespace dype::rt::remote {

class RemoteStageAttacher {
 public:
  RemoteStageAttacher(hw::SystemConfig system, std::shared_ptr<const HostDirectory> hosts,
                      std::shared_ptr<UcxContext> context, const Model& model, std::string model_name,
                      ChannelOptions options = {}, std::string token = "");
  // Links every remote stage of `spec` (one whose devices are all on one other host). Throws
  // Error naming the stage and host when a stage mixes hosts, or when the host's stage server
  // has not joined, cannot be reached or refuses the stage (with its reason).
  void operator()(PipelineSpec& spec) const;

 private:
  hw::SystemConfig system_;
  std::shared_ptr<const HostDirectory> hosts_;
  std::shared_ptr<UcxContext> context_;
  const Model& model_;
  std::string model_name_;
  ChannelOptions options_;
  std::string token_;
};

}  // namespace dype::rt::remote
