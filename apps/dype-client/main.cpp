// dype-client: a command-line client for dype-serve (Open Inference Protocol over HTTP).
//
//   dype-client infer  --model gcn --mtx tests/data/foo.mtx            # prints output shape + checksum
//   dype-client infer  --model gcn --nodes 2000 --edges 20000
//   dype-client stream --model gcn --requests 400 --rate 50 --concurrency 4
//                      --drift 0:2000x8000,200:4000x120000    (at request 200 the graph changes)
//   dype-client admin  --token-file tok plan | mode energy | pareto | devices | drain gpu0 | undrain gpu0 |
//                      load-bitstream fpga0 u280-sextans-swat.yaml | unload-bitstream fpga0
//
// Latencies are measured at the client (wall clock, request sent to response parsed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "kernels/graph/generators.h"
#include "kernels/graph/mtx_reader.h"
#include "kernels/graph/snap_reader.h"
#include "runtime/daemon/tensor.h"

using namespace dype;
using namespace dype::rt::daemon;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Endpoint {
  std::string host = "127.0.0.1";
  int port = 8000;
  int metrics_port = 8002;
};

std::unique_ptr<httplib::Client> client(const Endpoint& e) {
  auto c = std::make_unique<httplib::Client>(e.host, e.port);
  c->set_read_timeout(300, 0);
  c->set_write_timeout(300, 0);
  return c;
}

std::vector<std::int64_t> edge_index_of(const kernels::EdgeList& el) {
  std::vector<std::int64_t> v = el.src;
  v.insert(v.end(), el.dst.begin(), el.dst.end());
  return v;
}

// Sends one infer request in the binary form; returns the response or throws with the server's error.
InferResponse post_infer(httplib::Client& c, const std::string& model, const std::vector<Tensor>& inputs,
                         const json& params) {
  EncodedBody b = encode_infer_request("", inputs, params, true, true);
  httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(*b.header_length)}};
  auto r = c.Post(("/v2/models/" + model + "/infer").c_str(), h, b.body, "application/octet-stream");
  if (!r) throw dype::Error("no response from server: " + httplib::to_string(r.error()));
  if (r->status != 200) throw dype::Error("HTTP " + std::to_string(r->status) + ": " + r->body);
  std::optional<std::size_t> hl;
  if (r->has_header("Inference-Header-Content-Length")) hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  return parse_infer_response(r->body, hl);
}

json get_json(httplib::Client& c, const std::string& path, const httplib::Headers& h = {}) {
  auto r = c.Get(path.c_str(), h);
  if (!r) throw dype::Error("no response from server: " + httplib::to_string(r.error()));
  if (r->status != 200) throw dype::Error("HTTP " + std::to_string(r->status) + ": " + r->body);
  return json::parse(r->body);
}

int model_features(httplib::Client& c, const std::string& model) {
  const json m = get_json(c, "/v2/models/" + model);
  return m["inputs"][0]["shape"][1].get<int>();
}

bool is_transformer(httplib::Client& c, const std::string& model) {
  return get_json(c, "/v2/models/" + model)["platform"] == "dype_transformer";
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(std::min<double>(v.size() - 1, std::floor(p * static_cast<double>(v.size()))))];
}

// Plan epoch per model from the metrics port (public, no token), -1 when unreachable; `label`
// gets the plan's mnemonic and devices when given.
long plan_epoch(const Endpoint& e, const std::string& model, std::string* label = nullptr) {
  httplib::Client m(e.host, e.metrics_port);
  m.set_read_timeout(2, 0);
  auto r = m.Get("/metrics");
  if (!r || r->status != 200) return -1;
  if (label) {
    const std::string info = "dype_plan_info{model=\"" + model + "\",plan=\"";
    if (const auto i = r->body.find(info); i != std::string::npos) {
      const auto a = i + info.size();
      *label = r->body.substr(a, r->body.find('"', a) - a);
      const std::string pk = "pipeline=\"";
      if (const auto pi = r->body.find(pk, a); pi != std::string::npos && pi < r->body.find('\n', a))
        *label += " [" + r->body.substr(pi + pk.size(), r->body.find('"', pi + pk.size()) - pi - pk.size()) + "]";
    }
  }
  const std::string key = "dype_plan_epoch{model=\"" + model + "\"} ";
  const auto p = r->body.find(key);
  return p == std::string::npos ? -1 : std::stol(r->body.substr(p + key.size()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dype-client: talk to dype-serve"};
  app.require_subcommand(1);
  Endpoint ep;
  app.add_option("--host", ep.host, "server address");
  app.add_option("--http-port", ep.port, "server HTTP port");
  app.add_option("--metrics-port", ep.metrics_port, "server metrics port (plan changes during stream)");

  auto* infer = app.add_subcommand("infer", "one request; prints output shape and checksum");
  std::string model = "gcn", mtx, snap;
  std::int64_t nodes = 1000, edges = 8000, seq_len = 256, window = 16;
  std::uint64_t seed = 1;
  for (auto* s : {infer}) {
    s->add_option("--model", model);
    s->add_option("--mtx", mtx, "graph from a Matrix Market file");
    s->add_option("--snap", snap, "graph from a SNAP edge list");
    s->add_option("--nodes", nodes, "generated graph: nodes");
    s->add_option("--edges", edges, "generated graph: edges");
    s->add_option("--seq-len", seq_len, "transformer: tokens");
    s->add_option("--window", window, "transformer: attention half-window");
    s->add_option("--seed", seed);
  }

  auto* stream = app.add_subcommand("stream", "synthetic stream with a drift schedule");
  int requests = 200, concurrency = 4;
  double rate = 0.0;
  std::string drift = "0:1000x8000";
  stream->add_option("--model", model);
  stream->add_option("--requests", requests);
  stream->add_option("--rate", rate, "requests per second in total (0: as fast as possible)");
  stream->add_option("--concurrency", concurrency);
  stream->add_option("--drift", drift,
                     "at_request:NODESxEDGES (GNN) or at_request:SEQxWINDOW (transformer), comma separated");
  stream->add_option("--seed", seed);

  auto* admin = app.add_subcommand("admin", "admin API (needs the server's token)");
  std::string token_file, admin_model;
  std::vector<std::string> admin_args;
  admin->add_option("--token-file", token_file)->required();
  admin->add_option("--model", admin_model, "limit plan/pareto to one model");
  admin->add_option("command", admin_args, "plan | mode M | pareto | devices | drain DEV | undrain DEV | load-bitstream DEV PATH | unload-bitstream DEV")
      ->required();
  CLI11_PARSE(app, argc, argv);

  try {
    auto c = client(ep);
    if (*infer) {
      std::vector<Tensor> in;
      json params = json::object();
      if (is_transformer(*c, model)) {
        const int d = model_features(*c, model);
        in.push_back(Tensor::from_f32("x", {seq_len, d}, kernels::generate_features(seq_len, d, seed)));
        params["window"] = window;
      } else {
        kernels::EdgeList el = !mtx.empty() ? kernels::read_mtx(mtx)
                               : !snap.empty() ? kernels::read_snap(snap).edges
                                               : kernels::generate_uniform(nodes, edges, seed);
        const int f = model_features(*c, model);
        in.push_back(Tensor::from_f32("x", {el.num_nodes, f}, kernels::generate_features(el.num_nodes, f, seed)));
        in.push_back(Tensor::from_i64("edge_index", {2, el.num_edges()}, edge_index_of(el)));
        if (!el.weight.empty()) in.push_back(Tensor::from_f32("edge_weight", {el.num_edges()}, el.weight));
      }
      const auto t0 = Clock::now();
      const InferResponse r = post_infer(*c, model, in, params);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const Tensor& y = r.outputs.at(0);
      double sum = 0.0, abs_sum = 0.0;
      for (float v : y.f32()) {
        sum += v;
        abs_sum += std::fabs(v);
      }
      std::cout << "model " << model << " output " << y.name << " shape [" << y.shape[0] << ", " << y.shape[1]
                << "] checksum sum=" << sum << " abs_sum=" << abs_sum << " latency " << ms << " ms (measured)\n";
      return 0;
    }
    if (*stream) {
      // Phases of the drift schedule; a GNN phase registers its graph once and streams features.
      struct Phase {
        int at;
        std::int64_t a, b;
        std::string graph_id;
        std::vector<Tensor> inputs;
        json params = json::object();
      };
      std::vector<Phase> phases;
      std::stringstream ss(drift);
      for (std::string item; std::getline(ss, item, ',');) {
        Phase p{};
        if (std::sscanf(item.c_str(), "%d:%ldx%ld", &p.at, &p.a, &p.b) != 3)
          throw dype::InputError("--drift '" + item + "'", "expected at_request:AxB");
        phases.push_back(p);
      }
      if (phases.empty() || phases[0].at != 0) throw dype::InputError("--drift", "the first phase must start at request 0");
      const bool tf = is_transformer(*c, model);
      const int f = model_features(*c, model);
      for (std::size_t i = 0; i < phases.size(); ++i) {
        Phase& p = phases[i];
        if (tf) {
          p.inputs.push_back(Tensor::from_f32("x", {p.a, f}, kernels::generate_features(p.a, f, seed + i)));
          p.params["window"] = p.b;
        } else {
          const kernels::EdgeList el = kernels::generate_uniform(p.a, p.b, seed + i);
          json body = {{"parameters", {{"num_nodes", p.a}}}};
          EncodedBody b = encode_infer_request("", {Tensor::from_i64("edge_index", {2, el.num_edges()}, edge_index_of(el))},
                                               body["parameters"], true, false);
          auto r = c->Post("/v2/dype/graphs", {{"Inference-Header-Content-Length", std::to_string(*b.header_length)}},
                           b.body, "application/octet-stream");
          if (!r || r->status != 200) throw dype::Error("graph registration failed: " + (r ? r->body : httplib::to_string(r.error())));
          p.params["graph_id"] = json::parse(r->body)["id"];
          p.inputs.push_back(Tensor::from_f32("x", {p.a, f}, kernels::generate_features(p.a, f, seed + i)));
        }
      }
      std::atomic<int> next{0}, ok{0}, failed{0};
      std::mutex mu;
      std::vector<double> lat_ms;
      std::map<std::string, int> errors;
      const long epoch0 = plan_epoch(ep, model);
      const auto start = Clock::now();
      auto worker = [&] {
        auto wc = client(ep);
        for (int i; (i = next.fetch_add(1)) < requests;) {
          if (rate > 0) std::this_thread::sleep_until(start + std::chrono::duration<double>(i / rate));
          const Phase* p = &phases[0];
          for (const Phase& q : phases)
            if (i >= q.at) p = &q;
          const auto t0 = Clock::now();
          try {
            post_infer(*wc, model, p->inputs, p->params);
            std::lock_guard lock(mu);
            lat_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            ++ok;
          } catch (const std::exception& e) {
            std::lock_guard lock(mu);
            ++errors[std::string(e.what()).substr(0, 120)];
            ++failed;
          }
        }
      };
      std::vector<std::thread> ts;
      for (int i = 0; i < concurrency; ++i) ts.emplace_back(worker);
      std::atomic<bool> done{false};
      std::thread live([&] {
        int last = 0;
        long last_epoch = epoch0;
        while (!done.load()) {
          std::this_thread::sleep_for(std::chrono::seconds(1));
          const int now = ok.load();
          std::vector<double> snapshot;
          {
            std::lock_guard lock(mu);
            snapshot = lat_ms;
          }
          std::string label;
          const long e = plan_epoch(ep, model, &label);
          std::cout << "[" << std::chrono::duration<double>(Clock::now() - start).count() << " s] " << now - last
                    << " req/s, p50 " << percentile(snapshot, 0.5) << " ms, p99 " << percentile(snapshot, 0.99)
                    << " ms, plan epoch " << e << " " << label << (e != last_epoch ? " (changed)" : "") << "\n"
                    << std::flush;
          last = now;
          last_epoch = e;
        }
      });
      for (auto& t : ts) t.join();
      done = true;
      live.join();
      const double wall = std::chrono::duration<double>(Clock::now() - start).count();
      const long epoch1 = plan_epoch(ep, model);
      std::cout << "summary (measured at the client): " << ok << " ok, " << failed << " failed in " << wall << " s, "
                << ok / wall << " req/s, p50 " << percentile(lat_ms, 0.5) << " ms, p99 " << percentile(lat_ms, 0.99)
                << " ms, plan changes " << (epoch0 >= 0 && epoch1 >= 0 ? std::to_string(epoch1 - epoch0) : "unknown") << "\n";
      for (const auto& [e, n] : errors) std::cout << "  " << n << " x " << e << "\n";
      return failed == 0 ? 0 : 2;
    }
    if (*admin) {
      std::ifstream tf(token_file);
      std::string token;
      if (!tf || !std::getline(tf, token)) throw dype::InputError(token_file, "cannot read the token");
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
      const httplib::Headers h{{"Authorization", "Bearer " + token}};
      const std::string& cmd = admin_args[0];
      auto need = [&](std::size_t n) {
        if (admin_args.size() != n + 1) throw dype::InputError("admin " + cmd, "takes " + std::to_string(n) + " argument(s)");
      };
      const std::string q = admin_model.empty() ? "" : "?model=" + admin_model;
      auto send = [&]() -> httplib::Result {
        if (cmd == "plan") return c->Get(("/v2/dype/admin/plan" + q).c_str(), h);
        if (cmd == "devices") return c->Get("/v2/dype/admin/devices", h);
        if (cmd == "pareto") return c->Get(("/v2/dype/admin/pareto" + q).c_str(), h);
        if (cmd == "mode") {
          need(1);
          return c->Post("/v2/dype/admin/mode", h, json{{"mode", admin_args[1]}}.dump(), "application/json");
        }
        if (cmd == "drain" || cmd == "undrain") {
          need(1);
          return c->Post(("/v2/dype/admin/devices/" + admin_args[1] + "/" + cmd).c_str(), h, "", "application/json");
        }
        if (cmd == "load-bitstream") {
          need(2);
          return c->Post("/v2/dype/admin/bitstreams/load", h,
                         json{{"device", admin_args[1]}, {"path", admin_args[2]}}.dump(), "application/json");
        }
        if (cmd == "unload-bitstream") {
          need(1);
          return c->Post("/v2/dype/admin/bitstreams/unload", h, json{{"device", admin_args[1]}}.dump(), "application/json");
        }
        throw dype::InputError("admin", "unknown command '" + cmd + "'");
      };
      httplib::Result r = send();
      if (!r) throw dype::Error("no response from server: " + httplib::to_string(r.error()));
      try {
        std::cout << json::parse(r->body).dump(2) << "\n";
      } catch (const json::parse_error&) {
        std::cout << r->body << "\n";
      }
      return r->status == 200 ? 0 : 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "dype-client: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
