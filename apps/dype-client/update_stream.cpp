#include "update_stream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "graph/generators.h"

namespace dype::client {

using json = nlohmann::json;
using rt::daemon::Tensor;
using Clock = std::chrono::steady_clock;

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One POST of KServe-form tensors in the binary extension; the answer's JSON.
json post_tensors(httplib::Client& c, const std::string& path, const std::vector<Tensor>& tensors,
                  const json& params) {
  const rt::daemon::EncodedBody b =
      rt::daemon::encode_infer_request("", tensors, params, true, false);
  httplib::Headers h;
  if (b.header_length)
    h.emplace("Inference-Header-Content-Length", std::to_string(*b.header_length));
  auto r = c.Post(path.c_str(), h, b.body, b.content_type.c_str());
  if (!r) throw Error(path + ": no response from server: " + http_error(r.error()));
  if (r->status != 200) throw Error(path + ": HTTP " + std::to_string(r->status) + ": " + r->body);
  return json::parse(r->body);
}

Tensor edges_tensor(const std::string& name, const std::vector<std::int64_t>& src,
                    const std::vector<std::int64_t>& dst) {
  std::vector<std::int64_t> flat(src);
  flat.insert(flat.end(), dst.begin(), dst.end());
  return Tensor::from_i64(name, {2, static_cast<std::int64_t>(src.size())}, flat);
}

std::vector<Tensor> update_tensors(const rt::GraphUpdate& u, std::int64_t features) {
  std::vector<Tensor> t;
  if (!u.add_src.empty()) t.push_back(edges_tensor("add_edges", u.add_src, u.add_dst));
  if (!u.remove_src.empty()) t.push_back(edges_tensor("remove_edges", u.remove_src, u.remove_dst));
  if (u.add_nodes > 0) t.push_back(Tensor::from_f32("add_nodes", {u.add_nodes, features}, u.add_x));
  if (!u.set_rows.empty()) {
    t.push_back(
        Tensor::from_i64("set_rows", {static_cast<std::int64_t>(u.set_rows.size())}, u.set_rows));
    t.push_back(
        Tensor::from_f32("x", {static_cast<std::int64_t>(u.set_rows.size()), features}, u.set_x));
  }
  return t;
}

struct DriftPhase {
  int at = 0;
  int edges = 0;
};

std::vector<DriftPhase> parse_drift(const std::string& drift) {
  std::vector<DriftPhase> out;
  std::stringstream ss(drift);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto colon = item.find(':');
    DriftPhase p;
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      std::size_t used = 0;
      p.at = std::stoi(item.substr(0, colon), &used);
      p.edges = std::stoi(item.substr(colon + 1));
    } catch (const std::exception&) {
      throw InputError("--update-drift", "'" + item + "' is not at:edges (e.g. 0:2,300:5000)");
    }
    if (p.edges < 1)
      throw InputError("--update-drift", "'" + item + "': each update adds at least one edge");
    if (!out.empty() ? p.at <= out.back().at : p.at != 0)
      throw InputError("--update-drift",
                       "'" + item + "': phases start at update 0 and their starts increase");
    out.push_back(p);
  }
  if (out.empty()) throw InputError("--update-drift", "is empty");
  return out;
}

}  // namespace

rt::GraphUpdate parse_update_line(const std::string& line, std::int64_t features) {
  rt::GraphUpdate u;
  std::string text = line.substr(0, line.find('#'));
  std::stringstream changes(text);
  int index = 0;
  for (std::string change; std::getline(changes, change, ';'); ++index) {
    std::stringstream in(change);
    std::string op;
    if (!(in >> op)) continue;
    const std::string where = "change " + std::to_string(index) + " ('" + op + "')";
    auto number = [&](auto& v) {
      if (!(in >> v)) throw InputError(where, "expects more numbers");
    };
    auto row = [&](std::vector<float>& out) {
      for (std::int64_t c = 0; c < features; ++c) {
        float v;
        number(v);
        out.push_back(v);
      }
    };
    if (op == "+" || op == "-") {
      std::int64_t s, t;
      number(s);
      number(t);
      (op == "+" ? u.add_src : u.remove_src).push_back(s);
      (op == "+" ? u.add_dst : u.remove_dst).push_back(t);
    } else if (op == "n") {
      ++u.add_nodes;
      row(u.add_x);
    } else if (op == "x") {
      std::int64_t r;
      number(r);
      u.set_rows.push_back(r);
      row(u.set_x);
    } else {
      throw InputError(where, "unknown change: + S T, - S T, n ROW, x R ROW");
    }
    std::string extra;
    if (in >> extra)
      throw InputError(where, "has more values than its " + std::to_string(features) + " features");
  }
  return u;
}

int run_update_stream(const Endpoint& ep, Protocol protocol, const UpdateStreamOptions& o) {
  const std::unique_ptr<Transport> answers = make_transport(protocol, ep, /*streaming=*/true);
  const ModelInfo info = answers->model_info(o.model);
  if (info.transformer)
    throw InputError("--updates",
                     "model '" + o.model + "' is a transformer: updates are for graphs");
  const std::int64_t f = info.features;
  auto http = http_client(ep, ep.http_port);
  // The graph with its features (generated, seeded), registered once.
  std::int64_t nodes = o.graph.num_nodes;
  std::vector<Tensor> reg = graph_tensors(o.graph);
  reg.push_back(Tensor::from_f32("x", {nodes, f}, kernels::generate_features(nodes, f, o.seed)));
  const std::string id =
      post_tensors(*http, "/v2/dype/graphs", reg, json{{"num_nodes", nodes}}).at("id");
  struct Deleter {
    const Endpoint& ep;
    std::string id;
    ~Deleter() {
      try {
        delete_graph(ep, id);
      } catch (const std::exception& e) {
        std::cerr << "dype-client: could not delete graph " << id << ": " << e.what() << "\n";
      }
    }
  } deleter{ep, id};
  std::cout << "graph " << id << ": " << nodes << " nodes, " << o.graph.num_edges() << " edges, "
            << f << " features each, registered\n";
  const json by_id = {{"graph_id", id}};
  auto t0 = Clock::now();
  answers->infer(o.model, {}, by_id);
  std::cout << "first answer (whole graph, activations kept from here): "
            << ms_between(t0, Clock::now()) << " ms\n";

  // The updates: read from the file, or generated as the drift says.
  std::vector<std::string> lines;
  std::vector<DriftPhase> drift;
  if (!o.updates_file.empty()) {
    std::ifstream in(o.updates_file);
    if (!in) throw InputError("--updates", "cannot read '" + o.updates_file + "'");
    for (std::string line; std::getline(in, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos &&
          line.find_first_not_of(" \t\r") != line.find('#'))
        lines.push_back(line);
  } else {
    drift = parse_drift(o.drift);
  }
  const int total = o.updates_file.empty() ? o.updates : static_cast<int>(lines.size());
  std::mt19937_64 rng(o.seed);
  std::vector<double> upd_ms, ans_ms, both_ms;
  std::int64_t changes = 0, recomputed = 0, from_pipeline = 0;
  std::string mode = "kept";  // where the latest update said its answers come from
  int phase_index = 0, failed = 0;
  const long epoch0 = plan_epoch(ep, o.model);
  long last_epoch = epoch0;
  const auto start = Clock::now();
  auto tick = start;
  int done_in_tick = 0;
  for (int i = 0; i < total; ++i) {
    rt::GraphUpdate u;
    if (!o.updates_file.empty()) {
      try {
        u = parse_update_line(lines[static_cast<std::size_t>(i)], f);
      } catch (const InputError& e) {
        throw InputError(o.updates_file + ": update " + std::to_string(i + 1) + ": " + e.where(),
                         e.problem());
      }
    } else {
      while (phase_index + 1 < static_cast<int>(drift.size()) && i >= drift[phase_index + 1].at) {
        ++phase_index;
        std::cout << "update " << i << ": now " << drift[phase_index].edges << " edges an update\n";
      }
      for (int k = 0; k < drift[phase_index].edges; ++k) {
        u.add_src.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(nodes)));
        u.add_dst.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(nodes)));
      }
    }
    try {
      const auto a = Clock::now();
      const json r = post_tensors(*http, "/v2/dype/graphs/" + id + "/update", update_tensors(u, f),
                                  json::object());
      const auto b = Clock::now();
      nodes = r.at("num_nodes").get<std::int64_t>();
      changes += u.changes();
      const json m = r.at("models").value(o.model, json::object());
      if (m.contains("rows")) recomputed += m.at("rows").back().get<std::int64_t>();
      mode = m.value("answers", mode);  // where the planner priced the answers cheaper
      if (mode == "pipeline") ++from_pipeline;
      if (o.answer) {
        std::vector<Tensor> in;
        if (m.contains("changed_nodes") && !m.at("changed_nodes").empty()) {
          const auto ids = m.at("changed_nodes").get<std::vector<std::int64_t>>();
          in.push_back(Tensor::from_i64("node_ids", {static_cast<std::int64_t>(ids.size())}, ids));
        }
        if (!m.contains("changed_nodes") || !in.empty()) answers->infer(o.model, in, by_id);
      }
      const auto c = Clock::now();
      upd_ms.push_back(ms_between(a, b));
      ans_ms.push_back(ms_between(b, c));
      both_ms.push_back(ms_between(a, c));
    } catch (const std::exception& e) {
      ++failed;
      std::cout << "update " << i << " failed: " << std::string(e.what()).substr(0, 200) << "\n";
    }
    ++done_in_tick;
    if (Clock::now() - tick >= std::chrono::seconds(1) || i + 1 == total) {
      const double s = std::chrono::duration<double>(Clock::now() - tick).count();
      const long e = plan_epoch(ep, o.model);
      std::cout << "[" << std::chrono::duration<double>(Clock::now() - start).count() << " s] "
                << done_in_tick / s << " updates/s, update p50 " << percentile(upd_ms, 0.5)
                << " ms, answer p50 " << percentile(ans_ms, 0.5) << " ms, answers " << mode
                << ", plan epoch " << e << (e != last_epoch ? " (changed)" : "") << "\n";
      last_epoch = e;
      tick = Clock::now();
      done_in_tick = 0;
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const long epoch1 = plan_epoch(ep, o.model);
  const int ok = total - failed;
  std::cout << "summary (measured at the client): " << ok << " updates ok, " << failed
            << " failed in " << wall << " s: " << ok / wall << " updates/s, "
            << static_cast<double>(changes) / wall << " changes/s; update p50 "
            << percentile(upd_ms, 0.5) << " ms p99 " << percentile(upd_ms, 0.99)
            << " ms; answer p50 " << percentile(ans_ms, 0.5) << " ms p99 "
            << percentile(ans_ms, 0.99) << " ms; update + answer p50 " << percentile(both_ms, 0.5)
            << " ms; rows recomputed in the last layer " << (ok > 0 ? recomputed / ok : 0)
            << " per update; plan changes "
            << (epoch0 >= 0 && epoch1 >= 0 ? std::to_string(epoch1 - epoch0) : "unknown")
            << "; answered through the pipeline after " << from_pipeline
            << " updates (kept after the rest)\n";
  return failed == 0 ? 0 : 2;
}

}  // namespace dype::client
