// What operators monitor dype-serve with: the Grafana dashboard deploy/grafana/dype.json names only
// metrics a running daemon's /metrics exports, its expressions parse with Prometheus's own
// promtool, and a real Prometheus (Debian's `prometheus`) scrapes the daemon on loopback, answers
// the requests counter of a model over its HTTP API and returns data for every panel's expression.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../test_serve_process.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dype::test::read_all;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const fs::path kDashboard = fs::path(DYPE_SOURCE_DIR) / "deploy" / "grafana" / "dype.json";
constexpr int kServed = 12;  // successful requests the daemon answers for gcn

// One PromQL expression of the dashboard and where it sits.
struct Query {
  std::string where, expr;
};

// Every expression the dashboard runs: each panel target's, and each query variable's metric
// selector (label_values(SELECTOR, label)).
std::vector<Query> dashboard_queries() {
  const json d = json::parse(std::ifstream(kDashboard));
  std::vector<Query> out;
  for (const json& p : d.at("panels")) {
    if (!p.contains("targets")) continue;
    for (const json& t : p["targets"])
      out.push_back(
          {"panel '" + p["title"].get<std::string>() + "' " + t["refId"].get<std::string>(),
           t["expr"]});
  }
  for (const json& v : d.at("templating").at("list")) {
    if (v["type"] != "query") continue;
    const std::string q = v["query"]["query"];
    const auto open = q.find('('), comma = q.rfind(',');
    if (q.rfind("label_values(", 0) == 0 && comma != std::string::npos)
      out.push_back(
          {"variable $" + v["name"].get<std::string>(), q.substr(open + 1, comma - open - 1)});
    else
      ADD_FAILURE() << "variable " << v["name"] << ": not label_values(SELECTOR, label): " << q;
  }
  return out;
}

// Grafana's variables as Prometheus sees them once Grafana has filled them in: every instance and
// model, and windows that hold several of the test's 0.5 s scrapes.
std::string as_promql(std::string e) {
  for (const auto& [var, value] :
       std::vector<std::pair<std::string, std::string>>{{"$__rate_interval", "10s"},
                                                        {"$__range", "1m"},
                                                        {"$instance", ".*"},
                                                        {"$model", ".*"}}) {
    for (std::size_t at; (at = e.find(var)) != std::string::npos;) e.replace(at, var.size(), value);
  }
  return e;
}

// The metric names a PromQL expression reads: identifiers outside strings, label matchers ({...}),
// windows ([...]) and label lists (by/without/on/ignoring/group_left/group_right (...)), that are
// not a function (followed by '('), an aggregation (`sum by (x) (...)` puts its '(' later), a
// keyword or a number.
std::set<std::string> metric_names(const std::string& expr) {
  static const std::set<std::string> kKeywords = {
      "by",     "without", "on",     "ignoring",     "group_left", "group_right", "bool",
      "and",    "or",      "unless", "offset",       "inf",        "nan",         "Inf",
      "NaN",    "atan2",   "sum",    "min",          "max",        "avg",         "group",
      "stddev", "stdvar",  "count",  "count_values", "bottomk",    "topk",        "quantile"};
  static const std::set<std::string> kLabelLists = {"by",       "without",    "on",
                                                    "ignoring", "group_left", "group_right"};
  std::set<std::string> names;
  const auto ident_start = [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  };
  const auto ident_char = [&](char c) {
    return ident_start(c) || std::isdigit(static_cast<unsigned char>(c));
  };
  std::size_t i = 0;
  const auto skip_string = [&] {  // from its opening quote to past its closing one
    const char q = expr[i];
    for (++i; i < expr.size() && expr[i] != q; ++i)
      if (expr[i] == '\\') ++i;
    ++i;
  };
  const auto skip_group = [&](char close) {  // from its opening bracket to past its closing one
    for (++i; i < expr.size() && expr[i] != close;) {
      if (expr[i] == '"' || expr[i] == '\'' || expr[i] == '`')
        skip_string();
      else
        ++i;
    }
    ++i;
  };
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      skip_string();  // a function's string argument
    } else if (c == '{') {
      skip_group('}');
    } else if (c == '[') {
      skip_group(']');
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < expr.size() &&
                std::isdigit(static_cast<unsigned char>(expr[i + 1])))) {
      while (i < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '.'))
        ++i;  // 1e6, 0.99
    } else if (ident_start(c)) {
      const std::size_t start = i;
      while (i < expr.size() && ident_char(expr[i])) ++i;
      const std::string word = expr.substr(start, i - start);
      std::size_t next = i;
      while (next < expr.size() && std::isspace(static_cast<unsigned char>(expr[next]))) ++next;
      const bool call = next < expr.size() && expr[next] == '(';
      if (kLabelLists.count(word) && call) {
        i = next;
        skip_group(')');
      } else if (!call && !kKeywords.count(word)) {
        names.insert(word);
      }
    } else {
      ++i;
    }
  }
  return names;
}

// The sample names of a text exposition (comments skipped).
std::set<std::string> exported_names(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

// A dype-serve on the emulated paper testbed (devices with energy and busy time) that has answered
// kServed requests for gcn, one of them naming a registered graph, one naming an unknown graph, and
// re-planned once for an operator's mode change: every series the dashboard reads exists.
struct ServedDaemon {
  fs::path dir = dype::test::process_temp_dir("dype_monitoring");
  dype::test::Children children;
  int http_port = 0, metrics_port = 0;

  void start() {
    const fs::path token = dir / "token", ports = dir / "ports.json", log = dir / "serve.log";
    std::ofstream(token) << "s3cret\n";
    const std::string src = DYPE_SOURCE_DIR;
    children.pids.push_back(dype::test::spawn_serve(
        {"--system", src + "/configs/systems/paper-testbed-pcie4.yaml", "--builtin-models",
         "--no-warmup", "--admin-token-file", token.string(), "--http-port", "0", "--grpc-port",
         "-1", "--metrics-port", "0"},
        log, ports));
    ASSERT_TRUE(fs::exists(ports)) << read_all(log);
    const json p = json::parse(read_all(ports));
    http_port = p["http"], metrics_port = p["metrics"];
    httplib::Client c("127.0.0.1", http_port);
    std::string x;
    for (int i = 0; i < 3 * 64; ++i) x += (i ? "," : "") + std::to_string(i % 7);
    const std::string features =
        R"({"name":"x","datatype":"FP32","shape":[3,64],"data":[)" + x + "]}";
    const std::string edges =
        R"({"name":"edge_index","datatype":"INT64","shape":[2,3],"data":[0,1,2,1,2,0]})";
    for (int i = 0; i < kServed - 1; ++i) {
      const auto r = c.Post("/v2/models/gcn/infer",
                            R"({"inputs":[)" + features + "," + edges + "]}", "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
    }
    const auto reg =
        c.Post("/v2/dype/graphs", R"({"parameters":{"num_nodes":3},"inputs":[)" + edges + "]}",
               "application/json");
    ASSERT_TRUE(reg);
    ASSERT_EQ(reg->status, 200) << reg->body;
    const std::string id = json::parse(reg->body)["id"];
    for (const std::string& g : {id, std::string("gnosuch")}) {
      const auto r =
          c.Post("/v2/models/gcn/infer",
                 R"({"parameters":{"graph_id":")" + g + R"("},"inputs":[)" + features + "]}",
                 "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, g == id ? 200 : 404) << r->body;
    }
    const auto mode = c.Post("/v2/dype/admin/mode", {{"Authorization", "Bearer s3cret"}},
                             R"({"mode":"energy"})", "application/json");
    ASSERT_TRUE(mode);
    ASSERT_EQ(mode->status, 200) << mode->body;
  }

  std::string metrics() const {
    httplib::Client c("127.0.0.1", metrics_port);
    const auto r = c.Get("/metrics");
    return r && r->status == 200 ? r->body : "";
  }
};

TEST(Monitoring, DashboardIsAGrafanaModelOnAPrometheusDatasourceVariable) {
  const json d = json::parse(std::ifstream(kDashboard));
  EXPECT_FALSE(d["uid"].get<std::string>().empty());
  EXPECT_GT(d["schemaVersion"].get<int>(), 30);
  bool datasource = false;
  for (const json& v : d["templating"]["list"])
    datasource |=
        v["type"] == "datasource" && v["query"] == "prometheus" && v["name"] == "datasource";
  ASSERT_TRUE(datasource) << "no Prometheus datasource variable";
  std::set<int> ids;
  int queries = 0;
  for (const json& p : d["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "panel id " << p["id"] << " twice";
    const json& g = p["gridPos"];
    EXPECT_LE(g["x"].get<int>() + g["w"].get<int>(), 24) << p["title"];
    if (p["type"] == "row") continue;
    EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << p["title"];
    ASSERT_FALSE(p["targets"].empty()) << p["title"];
    for (const json& t : p["targets"])
      EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << p["title"];
    queries += static_cast<int>(p["targets"].size());
  }
  EXPECT_GE(queries, 20);
  // The names the parser finds, on a shape the dashboard uses.
  const std::string sample =
      R"q(sum by (model, le) (rate(a_bucket{model=~"x(y)", le!="1"}[5m])) / on(model) b_total)q"
      R"q( offset 1m > bool 0.5e3 + count_values("le", c:d) + max without (x) (e))q";
  EXPECT_EQ(metric_names(sample), (std::set<std::string>{"a_bucket", "b_total", "c:d", "e"}));
}

TEST(Monitoring, DashboardNamesOnlyMetricsTheDaemonExports) {
  ServedDaemon daemon;
  ASSERT_NO_FATAL_FAILURE(daemon.start());
  const std::string text = daemon.metrics();
  const std::set<std::string> exported = exported_names(text);
  ASSERT_TRUE(exported.count("dype_requests_total")) << text;
  std::set<std::string> used;
  for (const Query& q : dashboard_queries()) {
    const auto names = metric_names(as_promql(q.expr));
    EXPECT_FALSE(names.empty()) << q.where << ": no metric in " << q.expr;
    for (const std::string& n : names) {
      used.insert(n);
      EXPECT_TRUE(exported.count(n))
          << q.where << ": " << n << " is not in /metrics (" << q.expr << ")";
    }
  }
  // The panels the dashboard is for, each on its metric.
  for (const char* n :
       {"dype_requests_total", "dype_request_duration_seconds_bucket",
        "dype_request_queue_duration_us", "dype_request_compute_duration_us", "dype_plan_epoch",
        "dype_replans_total", "dype_inference_energy_joules_total",
        "dype_device_energy_joules_total", "dype_device_busy_seconds_total",
        "dype_graph_registry_graphs", "dype_graph_lookups_total"})
    EXPECT_TRUE(used.count(n)) << "no panel reads " << n;
}

// The text format's rules that Prometheus and promtool hold an exposition to: every sample under a
// family with HELP and TYPE, each family's lines in one group (histograms: _bucket, _sum, _count).
TEST(Monitoring, EveryFamilyIsOneGroupUnderItsHelpAndType) {
  ServedDaemon daemon;
  ASSERT_NO_FATAL_FAILURE(daemon.start());
  const std::string text = daemon.metrics();
  std::map<std::string, std::string> type;
  std::set<std::string> help, seen;
  std::string current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string hash, kind, name, value;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      words >> hash >> kind >> name >> value;
      if (kind == "HELP") {
        EXPECT_TRUE(help.insert(name).second) << "second HELP for " << name;
      } else {
        EXPECT_TRUE(type.emplace(name, value).second) << "second TYPE for " << name;
      }
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::string family = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      const std::string base =
          family.size() > s.size() ? family.substr(0, family.size() - s.size()) : "";
      if (!type.count(family) && family.ends_with(s) && type.count(base) &&
          type[base] == "histogram")
        family = base;
    }
    EXPECT_TRUE(type.count(family)) << family << " has no TYPE";
    EXPECT_TRUE(help.count(family)) << family << " has no HELP";
    if (family != current) {
      EXPECT_TRUE(seen.insert(family).second) << family << "'s lines are split by another family's";
      current = family;
    }
  }
  EXPECT_GT(seen.size(), 30u) << text;
}

// Prometheus's own parser on every expression: promtool checks them as recording rules.
TEST(Monitoring, DashboardExpressionsParseWithPromtool) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package ships it; "
                    "scripts/setup.sh installs it)";
  const fs::path rules = dype::test::process_temp_dir("dype_promtool") / "dashboard.rules.yml";
  std::ofstream f(rules);
  f << "groups:\n  - name: dashboard\n    rules:\n";
  int n = 0;
  for (const Query& q : dashboard_queries())
    f << "      - record: dype_dashboard:q" << n++
      << "\n        expr: " << json(as_promql(q.expr)).dump() << "\n";
  f.close();
  const std::string cmd = "promtool check rules " + rules.string() + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  for (char buf[512]; std::fgets(buf, sizeof buf, p);) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("SUCCESS: " + std::to_string(n) + " rules found"), std::string::npos) << out;
}

// A loopback port nobody listens on now (the kernel's choice).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

// Prometheus's answer to an instant query: its result vector (empty on an error, which `error`
// names).
json instant_query(httplib::Client& c, const std::string& promql, std::string* error = nullptr) {
  const auto r = c.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  if (!r) {
    if (error) *error = "no answer";
    return json::array();
  }
  const json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") {
    if (error) *error = r->body;
    return json::array();
  }
  return j["data"]["result"];
}

TEST(Monitoring, PrometheusScrapesTheDaemonAndAnswersEveryPanel) {
  const char* prometheus = "/usr/bin/prometheus";
  if (::access(prometheus, X_OK) != 0)
    GTEST_SKIP() << prometheus
                 << " is not installed (Debian's prometheus package; scripts/setup.sh installs it)";
  ServedDaemon daemon;
  ASSERT_NO_FATAL_FAILURE(daemon.start());
  const fs::path config = daemon.dir / "prometheus.yml", storage = daemon.dir / "tsdb",
                 log = daemon.dir / "prometheus.log";
  // deploy/prometheus.yml's job, on the daemon's ephemeral port, scraped every 0.5 s.
  std::ofstream(config)
      << "global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\nscrape_configs:\n"
         "  - job_name: dype-serve\n    static_configs:\n      - targets: [\"127.0.0.1:"
      << daemon.metrics_port << "\"]\n";
  const int port = free_port();
  ASSERT_GT(port, 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!freopen(log.c_str(), "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(126);
    const std::string c = "--config.file=" + config.string(),
                      s = "--storage.tsdb.path=" + storage.string(),
                      l = "--web.listen-address=127.0.0.1:" + std::to_string(port);
    execl(prometheus, prometheus, c.c_str(), s.c_str(), l.c_str(), "--log.level=warn",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  daemon.children.pids.push_back(pid);
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1);

  // The requests counter of gcn, as scraped: every request the daemon answered.
  const std::string counter = R"(dype_requests_total{job="dype-serve",model="gcn",result="ok"})";
  json result = json::array();
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (result.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    result = instant_query(c, counter);
  }
  ASSERT_EQ(result.size(), 1u) << "Prometheus has no " << counter << "\n" << read_all(log);
  EXPECT_EQ(result[0]["metric"]["instance"], "127.0.0.1:" + std::to_string(daemon.metrics_port));
  EXPECT_EQ(result[0]["value"][1], std::to_string(kServed)) << result.dump();

  // Every expression of the dashboard parses and returns data once the rates have two scrapes.
  std::map<std::string, std::string> empty;
  const auto rates_by = Clock::now() + std::chrono::seconds(10);
  for (const Query& q : dashboard_queries()) {
    std::string error;
    json r;
    while ((r = instant_query(c, as_promql(q.expr), &error)).empty() && error.empty() &&
           Clock::now() < rates_by)
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_TRUE(error.empty()) << q.where << ": " << error;
    if (error.empty() && r.empty()) empty[q.where] = as_promql(q.expr);
  }
  for (const auto& [where, expr] : empty) ADD_FAILURE() << where << " returns no data: " << expr;
  EXPECT_EQ(daemon.children.stop(pid), 0) << read_all(log);
}

}  // namespace
