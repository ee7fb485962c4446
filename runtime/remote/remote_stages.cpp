#include "runtime/remote/remote_stages.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "runtime/remote/ucx_stage_link.h"

namespace dype::rt::remote {

RemoteStageAttacher::RemoteStageAttacher(hw::SystemConfig system, std::shared_ptr<const HostDirectory> hosts,
                                         std::shared_ptr<UcxContext> context, const Model& model,
                                         std::string model_name, ChannelOptions options, std::string token)
    : system_(std::move(system)),
      hosts_(hosts ? std::move(hosts) : std::make_shared<HostDirectory>(system_)),  // null: the file's addresses
      context_(std::move(context)),
      model_(model),
      model_name_(std::move(model_name)),
      options_(options),
      token_(std::move(token)) {}

void RemoteStageAttacher::operator()(PipelineSpec& spec) const {
  for (std::size_t s = 0; s < spec.stages.size(); ++s) {
    PipelineStage& st = spec.stages[s];
    if (st.remote || st.devices.empty()) continue;
    const std::string where = "pipeline stage " + std::to_string(s) + " (kernels " + std::to_string(st.first) + "-" +
                              std::to_string(st.last) + ")";
    const std::string host = system_.remote_host(st.devices.front()->name());
    std::vector<std::string> names;
    for (hw::Device* d : st.devices) {
      if (system_.remote_host(d->name()) != host)
        throw Error(where + " has devices on two hosts ('" + (host.empty() ? "this one" : host) + "' and another)");
      names.push_back(d->name());
    }
    if (host.empty()) continue;
    if (spec.rounds > 1) throw Error(where + ": a recurrent pipeline cannot place a stage on host '" + host + "'");
    if (!system_.find_host(host)) throw Error(where + ": no host '" + host + "' in the system");
    const std::optional<std::string> address = hosts_->address(host);
    if (!address || address->empty()) throw Error(where + ": host '" + host + "' has not joined");
    // A server that is restarting (a worker rejoining) may refuse for a moment: an unreachable
    // server is tried again for a while before it counts.
    const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(3));
    for (;;) {
      try {
        st.remote = UcxStageLink::connect(context_, parse_host_port(*address), model_, model_name_, st.first, st.last,
                                          names, options_, token_);
        break;
      } catch (const ChannelError& e) {
        if (e.kind() != ChannelError::Kind::setup && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        throw Error(where + " on host '" + host + "' (" + *address + "): " + e.what());
      } catch (const std::exception& e) {
        throw Error(where + " on host '" + host + "' (" + *address + "): " + e.what());
      }
    }
  }
}

}  // namespace dype::rt::remote
