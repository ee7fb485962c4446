#include "perfmodel/model_store.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace dype::perf {
namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "dype-perfmodel";
constexpr int kVersion = 1;

std::string kernel_key(OpKind kind) { return std::string(kernels::to_string(kind)); }

// Helpers that fail with the JSON key path in the message.
const json& member(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) throw InputError(where, "expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(where, "missing key '" + key + "'");
  return *it;
}

double finite_number(const json& v, const std::string& where) {
  if (!v.is_number()) throw InputError(where, "expected a number, got " + std::string(v.type_name()));
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw InputError(where, "value is not finite");
  return x;
}

std::string string_field(const json& obj, const std::string& key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_string()) throw InputError(where + "." + key, "expected a string");
  return v.get<std::string>();
}

json params_to_json(const FeatureParams& p) {
  return {{"llc_bytes", p.llc_bytes},         {"l2_bytes", p.l2_bytes},  {"l1_bytes", p.l1_bytes},
          {"simd_floats", p.simd_floats},     {"threads", p.threads},
          {"sextans_f_mhz", p.sextans_f_mhz},
          {"sextans_nm", p.sextans_nm},       {"swat_t_pipeline", p.swat_t_pipeline},
          {"swat_t_init", p.swat_t_init},     {"swat_f_mhz", p.swat_f_mhz}};
}

FeatureParams params_from_json(const json& j, const std::string& where) {
  FeatureParams p;
  auto get = [&](const char* key, double& out) {
    if (j.contains(key)) {
      out = finite_number(j[key], where + "." + key);
      if (out <= 0) throw InputError(where + "." + key, "must be positive");
    }
  };
  get("llc_bytes", p.llc_bytes);
  get("l2_bytes", p.l2_bytes);
  get("l1_bytes", p.l1_bytes);
  get("simd_floats", p.simd_floats);
  get("threads", p.threads);
  get("sextans_f_mhz", p.sextans_f_mhz);
  get("sextans_nm", p.sextans_nm);
  get("swat_t_pipeline", p.swat_t_pipeline);
  get("swat_t_init", p.swat_t_init);
  get("swat_f_mhz", p.swat_f_mhz);
  return p;
}

json model_to_json(const KernelModel& m) {
  json j;
  j["feature_set"] = std::string(m.features->id);
  json names = json::array();
  for (auto n : m.features->names) names.push_back(std::string(n));
  j["features"] = names;
  j["coefficients"] = m.coefficients;
  json ranges = json::array();
  for (const auto& r : m.ranges) ranges.push_back({r.min, r.max});
  j["ranges"] = ranges;
  j["params"] = params_to_json(m.params);
  const auto& s = m.stats;
  j["stats"] = {{"samples", s.samples},       {"train", s.train},
                {"holdout", s.holdout},       {"rejected", s.rejected},
                {"r2_holdout", s.r2_holdout}, {"mape_holdout", s.mape_holdout},
                {"max_ape_holdout", s.max_ape_holdout}, {"mape_train", s.mape_train}};
  const auto& r = m.refinement;
  j["refinement"] = {{"version", r.version},   {"log_size_ref", r.log_size_ref},
                     {"a", r.a},               {"b", r.b},
                     {"p", {r.p00, r.p01, r.p11}}, {"scale", r.scale},
                     {"accepted", r.accepted}, {"rejected", r.rejected}};
  // Shape history, least recently used first, each shape's ratios oldest first.
  std::vector<const ShapeHistory*> hs;
  for (const auto& h : r.history) hs.push_back(&h);
  std::sort(hs.begin(), hs.end(), [](const ShapeHistory* x, const ShapeHistory* y) { return x->last_used < y->last_used; });
  json history = json::array();
  for (const ShapeHistory* h : hs) {
    char key[17];
    std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(h->key));
    json ratios = json::array();
    const int start = h->count < ShapeHistory::kKept ? 0 : h->next;
    for (int i = 0; i < h->count; ++i) ratios.push_back(h->log_ratios[static_cast<std::size_t>((start + i) % ShapeHistory::kKept)]);
    history.push_back({{"shape_key", key}, {"log_ratios", ratios}});
  }
  j["refinement"]["shape_history"] = history;
  json samples = json::array();
  for (const auto& x : m.samples) {
    const auto& sh = x.shape;
    json row = {sh.m, sh.k, sh.n, sh.nnz, sh.seq_len, sh.window, sh.heads, sh.head_dim,
                sh.degree_skew, x.seconds, x.holdout ? 1 : 0};
    if (sh.locality.known()) row.push_back(sh.locality.miss);  // the SpMM miss-ratio curve
    samples.push_back(std::move(row));
  }
  j["samples"] = samples;
  return j;
}

KernelModel model_from_json(const json& j, OpKind kind, DeviceClass cls, const std::string& where) {
  KernelModel m;
  const std::string fs_id = string_field(j, "feature_set", where);
  m.features = feature_set_by_id(fs_id);
  if (m.features == nullptr) {
    throw InputError(where + ".feature_set", "unknown feature set '" + fs_id + "'");
  }
  if (m.features->kind != kind) {
    throw InputError(where + ".feature_set",
                     "feature set '" + fs_id + "' is for another kernel than " + kernel_key(kind));
  }
  if (m.features->device_class != cls) {
    throw InputError(where + ".feature_set", "feature set '" + fs_id +
                                                 "' is for another device class than " +
                                                 std::string(to_string(cls)));
  }
  const auto nf = static_cast<std::size_t>(m.features->size());
  const json& coeffs = member(j, "coefficients", where);
  if (!coeffs.is_array() || coeffs.size() != nf) {
    throw InputError(where + ".coefficients",
                     "expected an array of " + std::to_string(nf) + " numbers");
  }
  for (std::size_t i = 0; i < nf; ++i) {
    const std::string w = where + ".coefficients[" + std::to_string(i) + "]";
    const double c = finite_number(coeffs[i], w);
    if (m.features->non_negative[i] && c < 0) {
      throw InputError(w, "coefficient of '" + std::string(m.features->names[i]) +
                              "' must be non-negative, got " + std::to_string(c));
    }
    m.coefficients.push_back(c);
  }
  const json& ranges = member(j, "ranges", where);
  if (!ranges.is_array() || ranges.size() != nf) {
    throw InputError(where + ".ranges", "expected " + std::to_string(nf) + " [min, max] pairs");
  }
  for (std::size_t i = 0; i < nf; ++i) {
    const std::string w = where + ".ranges[" + std::to_string(i) + "]";
    if (!ranges[i].is_array() || ranges[i].size() != 2) throw InputError(w, "expected [min, max]");
    FeatureRange r{finite_number(ranges[i][0], w + "[0]"), finite_number(ranges[i][1], w + "[1]")};
    if (r.min > r.max) throw InputError(w, "min > max");
    m.ranges.push_back(r);
  }
  if (j.contains("params")) m.params = params_from_json(j["params"], where + ".params");
  if (j.contains("stats")) {
    const json& s = j["stats"];
    const std::string w = where + ".stats";
    auto num = [&](const char* key) {
      return s.contains(key) ? finite_number(s[key], w + "." + key) : 0.0;
    };
    m.stats.samples = static_cast<int>(num("samples"));
    m.stats.train = static_cast<int>(num("train"));
    m.stats.holdout = static_cast<int>(num("holdout"));
    m.stats.rejected = static_cast<int>(num("rejected"));
    m.stats.r2_holdout = num("r2_holdout");
    m.stats.mape_holdout = num("mape_holdout");
    m.stats.max_ape_holdout = num("max_ape_holdout");
    m.stats.mape_train = num("mape_train");
  }
  m.refinement.reset();
  if (j.contains("refinement")) {
    const json& r = j["refinement"];
    const std::string w = where + ".refinement";
    auto& rf = m.refinement;
    rf.version = static_cast<std::uint64_t>(finite_number(member(r, "version", w), w + ".version"));
    rf.log_size_ref = finite_number(member(r, "log_size_ref", w), w + ".log_size_ref");
    rf.a = finite_number(member(r, "a", w), w + ".a");
    rf.b = finite_number(member(r, "b", w), w + ".b");
    const json& p = member(r, "p", w);
    if (!p.is_array() || p.size() != 3) throw InputError(w + ".p", "expected 3 numbers");
    rf.p00 = finite_number(p[0], w + ".p[0]");
    rf.p01 = finite_number(p[1], w + ".p[1]");
    rf.p11 = finite_number(p[2], w + ".p[2]");
    rf.scale = finite_number(member(r, "scale", w), w + ".scale");
    if (r.contains("accepted")) rf.accepted = r["accepted"].get<std::uint64_t>();
    if (r.contains("rejected")) rf.rejected = r["rejected"].get<std::uint64_t>();
    if (r.contains("shape_history")) {
      const json& hs = r["shape_history"];
      if (!hs.is_array()) throw InputError(w + ".shape_history", "expected an array");
      for (std::size_t i = 0; i < hs.size(); ++i) {
        const std::string hw = w + ".shape_history[" + std::to_string(i) + "]";
        const json& key = member(hs[i], "shape_key", hw);
        const std::string ks = key.is_string() ? key.get<std::string>() : std::string();
        char* end = nullptr;
        const unsigned long long k = ks.size() == 16 ? std::strtoull(ks.c_str(), &end, 16) : 0;
        if (ks.size() != 16 || end != ks.c_str() + ks.size() || k == 0)
          throw InputError(hw + ".shape_key", "expected 16 hex digits, not zero");
        if (rf.history_of(k)) throw InputError(hw + ".shape_key", "appears twice");
        const json& lr = member(hs[i], "log_ratios", hw);
        if (!lr.is_array() || lr.empty() || lr.size() > static_cast<std::size_t>(ShapeHistory::kKept))
          throw InputError(hw + ".log_ratios", "expected 1 to " + std::to_string(ShapeHistory::kKept) + " numbers");
        ShapeHistory h;
        h.key = k;
        for (std::size_t q = 0; q < lr.size(); ++q)
          h.log_ratios[q] = finite_number(lr[q], hw + ".log_ratios[" + std::to_string(q) + "]");
        h.count = static_cast<int>(lr.size());
        h.next = h.count % ShapeHistory::kKept;
        h.last_used = ++rf.history_clock;
        rf.history.push_back(h);
      }
    }
  }
  if (j.contains("samples")) {
    const json& ss = j["samples"];
    if (!ss.is_array()) throw InputError(where + ".samples", "expected an array");
    for (std::size_t i = 0; i < ss.size(); ++i) {
      const std::string w = where + ".samples[" + std::to_string(i) + "]";
      const json& x = ss[i];
      if (!x.is_array() || (x.size() != 11 && x.size() != 12))
        throw InputError(w, "expected 11 numbers (and optionally a miss-ratio curve)");
      StoredSample s;
      auto iv = [&](std::size_t k) {
        return static_cast<std::int64_t>(finite_number(x[k], w + "[" + std::to_string(k) + "]"));
      };
      s.shape.kind = kind;
      s.shape.m = iv(0);
      s.shape.k = iv(1);
      s.shape.n = iv(2);
      s.shape.nnz = iv(3);
      s.shape.seq_len = iv(4);
      s.shape.window = iv(5);
      s.shape.heads = iv(6);
      s.shape.head_dim = iv(7);
      s.shape.degree_skew = finite_number(x[8], w + "[8]");
      s.seconds = finite_number(x[9], w + "[9]");
      s.holdout = iv(10) != 0;
      if (x.size() == 12) {
        const json& curve = x[11];
        const std::string cw = w + "[11]";
        if (!curve.is_array() || curve.size() != kernels::GatherLocality::kLevels)
          throw InputError(cw, "expected " + std::to_string(kernels::GatherLocality::kLevels) + " miss ratios");
        for (std::size_t l = 0; l < curve.size(); ++l) {
          const double v = finite_number(curve[l], cw + "[" + std::to_string(l) + "]");
          if (v < 0 || v > 1) throw InputError(cw + "[" + std::to_string(l) + "]", "miss ratio outside [0, 1]");
          s.shape.locality.miss[l] = static_cast<float>(v);
        }
      }
      m.samples.push_back(s);
    }
  }
  return m;
}

}  // namespace

const KernelModel* ModelStore::find(OpKind kind) const {
  auto it = models.find(kind);
  return it == models.end() ? nullptr : &it->second;
}

KernelModel* ModelStore::find(OpKind kind) {
  auto it = models.find(kind);
  return it == models.end() ? nullptr : &it->second;
}

const KernelModel& ModelStore::at(OpKind kind) const {
  const KernelModel* m = find(kind);
  if (m == nullptr) {
    throw Error("no performance model for " + kernel_key(kind) + " on device model '" +
                device_model + "' (profile it with dype-profile)");
  }
  return *m;
}

KernelModel& ModelStore::at(OpKind kind) {
  return const_cast<KernelModel&>(static_cast<const ModelStore&>(*this).at(kind));
}

std::string ModelStore::to_json_text() const {
  json j;
  j["format"] = std::string(kFormat);
  j["version"] = kVersion;
  j["device_model"] = device_model;
  j["device_class"] = std::string(to_string(device_class));
  j["provenance"] = provenance;
  j["time_basis"] = time_basis;
  j["host"] = host;
  if (!conditions.empty()) j["conditions"] = conditions;
  j["created"] = created;
  json ms = json::object();
  for (const auto& [kind, m] : models) ms[kernel_key(kind)] = model_to_json(m);
  j["models"] = ms;
  return j.dump(1);
}

ModelStore ModelStore::parse(std::string_view text, const std::string& where,
                             std::string_view expected_device_model) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999 and the like
    throw InputError(where, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) throw InputError(where, "expected a JSON object at the top level");
  const std::string format = string_field(j, "format", where);
  if (format != kFormat) {
    throw InputError(where + ".format", "is '" + format + "', expected '" + std::string(kFormat) + "'");
  }
  const json& ver = member(j, "version", where);
  if (!ver.is_number_integer() || ver.get<int>() != kVersion) {
    throw InputError(where + ".version", "unsupported version " + ver.dump() + ", expected " +
                                             std::to_string(kVersion));
  }
  ModelStore store;
  store.device_model = string_field(j, "device_model", where);
  if (!expected_device_model.empty() && store.device_model != expected_device_model) {
    throw InputError(where + ".device_model", "file holds models for device '" +
                                                  store.device_model + "', expected '" +
                                                  std::string(expected_device_model) + "'");
  }
  const std::string cls = string_field(j, "device_class", where);
  const auto dc = device_class_from_string(cls);
  if (!dc) throw InputError(where + ".device_class", "unknown device class '" + cls + "'");
  store.device_class = *dc;
  if (j.contains("provenance")) store.provenance = string_field(j, "provenance", where);
  if (store.provenance != "measured" && store.provenance != "modelled") {
    throw InputError(where + ".provenance", "must be 'measured' or 'modelled'");
  }
  if (j.contains("time_basis")) store.time_basis = string_field(j, "time_basis", where);
  if (store.time_basis != "wall" && store.time_basis != "cpu_time" && store.time_basis != "device") {
    throw InputError(where + ".time_basis", "must be 'wall', 'cpu_time' or 'device'");
  }
  if (j.contains("host")) store.host = string_field(j, "host", where);
  if (j.contains("conditions")) store.conditions = string_field(j, "conditions", where);
  if (j.contains("created")) store.created = string_field(j, "created", where);
  const json& ms = member(j, "models", where);
  if (!ms.is_object()) throw InputError(where + ".models", "expected an object keyed by kernel");
  for (const auto& [key, value] : ms.items()) {
    const auto kind = kernels::op_kind_from_string(key);
    if (!kind) throw InputError(where + ".models." + key, "unknown kernel '" + key + "'");
    store.models.emplace(*kind, model_from_json(value, *kind, store.device_class,
                                                where + ".models." + key));
  }
  return store;
}

ModelStore ModelStore::load(const std::filesystem::path& file,
                            std::string_view expected_device_model) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw InputError(file.string(), "cannot open performance model file (missing? create it with "
                                    "`dype-profile run`)");
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return parse(buf.str(), file.string(), expected_device_model);
}

void ModelStore::save(const std::filesystem::path& file) const {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp.string());
    out << to_json_text() << '\n';
    if (!out) throw Error("write failed: " + tmp.string());
  }
  std::filesystem::rename(tmp, file);
}

std::filesystem::path ModelStore::default_path(const std::filesystem::path& root,
                                               std::string_view device_model) {
  std::string name(device_model);
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  return root / "configs" / "perfmodels" / (name + ".json");
}

}  // namespace dype::perf
