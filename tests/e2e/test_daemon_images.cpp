// Image choice in the daemon, end to end over HTTP (httplib client, loopback): on the emulated paper
// testbed (2 MI210, 3 U280 with the SWAT image), POST /v2/dype/admin/images proposes the FPGA
// images a GCN's energy plan wants, reloads only when the reloads pay within the horizon, carries
// the reloads out through the drain/load/rollback path while a client streams requests (every
// answer correct, none lost), and undoes every load when one fails.
#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "hw/emu/emu_device.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/model.h"

// After the project headers: httplib pulls in <resolv.h>, whose _res macro breaks Eigen headers.
#include <httplib.h>

using namespace dype;
using namespace dype::rt::daemon;
using json = nlohmann::json;

namespace {

EngineServiceOptions gcn_energy() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  o.mode = "energy";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 64, .hidden = 64, .seed = 7};
  o.models = {{"gcn", gcn, {.nodes = 200000, .nnz = 4000000, .feature_len = 64}}};
  return o;
}

std::map<std::string, std::string> images_of(const EngineService& s) {
  std::map<std::string, std::string> out;
  for (const hw::Device* d : s.system().devices_of(hw::DeviceKind::fpga))
    out[d->name()] = d->bitstream() ? d->bitstream()->name : "none";
  return out;
}

}  // namespace

TEST(DaemonImages, ChoosesReloadsAndRollsBackOverHttp) {
  EngineService service(gcn_energy());
  GraphRegistry graphs;
  Metrics metrics;
  ServerOptions o;
  o.host = "127.0.0.1";
  o.http_port = 0;
  o.metrics_port = 0;
  o.admin_token = "s3cret";
  HttpServer server(service, graphs, metrics, o, admin_hooks(service));
  server.start();
  httplib::Client client("127.0.0.1", server.http_port());
  client.set_read_timeout(120, 0);
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  auto choose = [&](const json& body) {
    auto r = client.Post("/v2/dype/admin/images", auth, body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r;
  };
  const auto start_images = images_of(service);
  const std::string start_label = service.engine("gcn").current_label();
  for (const auto& [fpga, image] : start_images) EXPECT_EQ(image, "u280-sextans-swat") << fpga;

  // A horizon of one request: no reload pays for itself.
  auto short_h = choose({{"horizon", 1}});
  ASSERT_EQ(short_h->status, 200) << short_h->body;
  const json sj = json::parse(short_h->body);
  EXPECT_EQ(sj["images"], "3 x u280-sextans-swat");
  EXPECT_TRUE(sj["reloads"].empty()) << sj.dump();
  EXPECT_FALSE(sj["applied"].get<bool>());

  // A long horizon: the proposal reloads FPGAs with the GEMM image; nothing changes yet.
  auto long_h = choose({{"horizon", 1e9}});
  ASSERT_EQ(long_h->status, 200) << long_h->body;
  const json lj = json::parse(long_h->body);
  std::printf("proposal: %s -> %s (%s), %zu reloads, pause %.3g s (modelled)\n", start_label.c_str(),
              lj["predicted"]["plan"].get<std::string>().c_str(), lj["images"].get<std::string>().c_str(),
              lj["reloads"].size(), lj["pause_s"].get<double>());
  ASSERT_FALSE(lj["reloads"].empty()) << lj.dump();
  EXPECT_LT(lj["predicted"]["energy_j"].get<double>(), sj["predicted"]["energy_j"].get<double>());
  EXPECT_EQ(lj["candidates"].size(), 2u);
  EXPECT_EQ(images_of(service), start_images);
  EXPECT_EQ(service.engine("gcn").current_label(), start_label);

  // The last FPGA to reload fails: every load is undone, the plan is restored, 409 names the cause.
  const std::string last = lj["reloads"].back()["device"];
  auto* failing = dynamic_cast<hw::EmuDevice*>(service.system().find(last));
  ASSERT_NE(failing, nullptr);
  failing->inject_fault(0, "PCIe link reset");
  auto failed = choose({{"horizon", 1e9}, {"apply", true}});
  ASSERT_EQ(failed->status, 409) << failed->body;
  EXPECT_NE(failed->body.find("PCIe link reset"), std::string::npos) << failed->body;
  EXPECT_EQ(images_of(service), start_images);
  EXPECT_EQ(service.engine("gcn").current_label(), start_label);
  EXPECT_TRUE(service.engine("gcn").drained_devices().empty());

  // Carried out while a client streams requests: every answer arrives and matches the reference.
  const rt::Model& model = *service.model("gcn").model;
  const kernels::EdgeList el = rt::random_graph(150, 900, 3);
  std::vector<std::int64_t> edge_index = el.src;
  edge_index.insert(edge_index.end(), el.dst.begin(), el.dst.end());
  std::vector<float> x(150 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  const rt::HostTensor ref =
      rt::reference_forward(model, rt::Request::gnn(rt::Graph::from_edges(el, true), rt::make_tensor(150, 64, x)));
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, wrong{0};
  std::thread stream([&] {
    httplib::Client c("127.0.0.1", server.http_port());
    c.set_read_timeout(120, 0);
    while (!stop || answered < 8) {
      EncodedBody b = encode_infer_request("", {Tensor::from_f32("x", {150, 64}, x),
                                                Tensor::from_i64("edge_index", {2, 900}, edge_index)},
                                           {}, true, true);
      httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(*b.header_length)}};
      auto r = c.Post("/v2/models/gcn/infer", h, b.body, "application/octet-stream");
      if (!r || r->status != 200) {
        ++wrong;
        continue;
      }
      std::optional<std::size_t> hl;
      if (r->has_header("Inference-Header-Content-Length"))
        hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
      const InferResponse resp = parse_infer_response(r->body, hl);
      const Tensor& t = resp.outputs.at(0);
      if (rt::relative_error(rt::make_tensor(t.shape[0], t.shape[1], t.f32()), ref) > 1e-5) ++wrong;
      ++answered;
    }
  });
  while (answered < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto applied = choose({{"horizon", 1e9}, {"apply", true}});
  stop = true;
  stream.join();
  ASSERT_EQ(applied->status, 200) << applied->body;
  const json aj = json::parse(applied->body);
  EXPECT_TRUE(aj["applied"].get<bool>());
  EXPECT_EQ(aj["loads"].size(), lj["reloads"].size());
  for (const json& l : aj["loads"]) {
    EXPECT_EQ(l["load_time_source"], "modelled");
    EXPECT_EQ(service.system().find(l["device"].get<std::string>())->bitstream()->name, l["bitstream"].get<std::string>());
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(answered.load(), 8);
  std::printf("applied: %d requests answered during the swap, plan %s\n", answered.load(),
              service.engine("gcn").current_label().c_str());
  // Every FPGA of the new plan runs its stages' kernels with the image it now holds.
  for (const rt::PipelineStage& st : service.engine("gcn").current_spec().stages)
    for (const hw::Device* d : st.devices)
      for (int k = st.first; k <= st.last; ++k) EXPECT_TRUE(d->supports(model.step(k).op)) << d->name();
  // Asked again, nothing is left to reload.
  auto again = choose({{"horizon", 1e9}});
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_TRUE(json::parse(again->body)["reloads"].empty()) << again->body;

  // Bad input names the field.
  auto bad = choose({{"horizon", 0}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("horizon"), std::string::npos) << bad->body;
  auto bad_type = choose({{"apply", "yes"}});
  EXPECT_EQ(bad_type->status, 400);
  EXPECT_NE(bad_type->body.find("apply"), std::string::npos) << bad_type->body;
  EXPECT_EQ(choose({{"model", "nope"}})->status, 404);
  EXPECT_EQ(client.Post("/v2/dype/admin/images", "{}", "application/json")->status, 401);
  server.stop();
}
