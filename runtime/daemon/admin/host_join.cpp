#include "runtime/daemon/admin/host_join.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "hw/device_profile.h"
#include "runtime/daemon/proto/dype_admin.grpc.pb.h"

namespace dype::rt::daemon {

HostJoiner::HostJoiner(HostJoinOptions options, std::span<hw::Device* const> devices) : options_(std::move(options)) {
  dype::admin::JoinRequest r;
  r.set_host(options_.host);
  r.set_address(options_.address);
  for (hw::Device* d : devices) {
    auto* j = r.add_devices();
    j->set_name(d->name());
    j->set_kind(std::string(hw::to_string(d->kind())));
    j->set_product(d->info().product);
    if (const hw::DeviceProfile* m = d->device_profile()) j->set_model(m->id);
    if (const hw::Bitstream* b = d->bitstream()) j->set_bitstream(b->name);
  }
  request_ = r.SerializeAsString();
  thread_ = std::thread([this] { run(); });
}

HostJoiner::~HostJoiner() { stop(); }

void HostJoiner::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HostJoiner::run() {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options_.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateChannel(options_.coordinator, credentials);
  auto stub = dype::admin::DypeAdmin::NewStub(channel);
  dype::admin::JoinRequest request;
  request.ParseFromString(request_);
  std::string last;  // the latest outcome logged
  for (;;) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + options_.token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::max(options_.interval, std::chrono::milliseconds(500)));
    dype::admin::AdminResponse response;
    const grpc::Status st = stub->JoinHost(&ctx, request, &response);
    std::string outcome;
    if (st.ok()) {
      ++accepted_;
      outcome = "joined the coordinator at " + options_.coordinator + " as host '" + options_.host + "' (" +
                options_.address + ")";
    } else {
      ++refused_;
      outcome = "the coordinator at " + options_.coordinator + " " +
                (st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                     ? "does not answer"
                     : "refuses the join") +
                ": " + st.error_message();
    }
    if (outcome != last) {
      if (st.ok()) spdlog::info("{}", outcome);
      else spdlog::warn("{} (trying again every {} ms)", outcome, options_.interval.count());
      last = outcome;
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.interval, [this] { return stop_; })) return;
  }
}

}  // namespace dype::rt::daemon
