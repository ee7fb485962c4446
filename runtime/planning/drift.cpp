#include "runtime/planning/drift.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace dype::rt {

namespace {

struct Field {
  const char* name;
  double (*get)(const Characteristics&);
};

const Field kFields[] = {
    {"nodes", [](const Characteristics& c) { return static_cast<double>(c.nodes); }},
    {"nnz", [](const Characteristics& c) { return static_cast<double>(c.nnz); }},
    {"feature_len", [](const Characteristics& c) { return static_cast<double>(c.feature_len); }},
    {"seq_len", [](const Characteristics& c) { return static_cast<double>(c.seq_len); }},
    {"window", [](const Characteristics& c) { return static_cast<double>(c.window); }},
};

double rel(double v, double base) { return (v - base) / std::max(1.0, std::fabs(base)); }

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

DriftDetector::DriftDetector(DriftOptions options, Characteristics baseline)
    : options_(options), baseline_(baseline) {}

void DriftDetector::rebase(const Characteristics& baseline, std::uint64_t request_index) {
  baseline_ = baseline;
  streak_ = 0;
  streak_sign_ = 0;
  streak_field_.clear();
  last_signal_ = request_index;
  rebased_at_ = request_index;
  signalled_once_ = true;
  for (auto& s : stages_) {
    s.samples.clear();
    s.base = 0.0;
    s.streak = 0;
  }
  pending_stage_signal_.reset();
}

std::optional<DriftSignal> DriftDetector::observe(const Characteristics& c, std::uint64_t idx) {
  if (!options_.enabled) return std::nullopt;
  recent_.push_back(c);
  while (static_cast<int>(recent_.size()) > std::max(options_.window, options_.sustain)) recent_.pop_front();
  // Which characteristic moves most beyond the threshold on this request.
  const Field* worst = nullptr;
  double worst_rel = 0.0;
  for (const Field& f : kFields) {
    const double r = rel(f.get(c), f.get(baseline_));
    if (std::fabs(r) > options_.threshold && std::fabs(r) > std::fabs(worst_rel)) {
      worst = &f;
      worst_rel = r;
    }
  }
  if (!worst) {
    streak_ = 0;
    streak_sign_ = 0;
  } else {
    // Any field beyond the threshold keeps the streak; the direction of the main mover is noted.
    const int sign = worst_rel > 0 ? 1 : -1;
    if (streak_ > 0 && streak_field_ == worst->name && sign != streak_sign_) streak_ = 0;
    ++streak_;
    streak_sign_ = sign;
    streak_field_ = worst->name;
  }
  const bool rate_ok = !signalled_once_ || idx >= last_signal_ + static_cast<std::uint64_t>(options_.min_requests_between);
  if (worst && streak_ >= options_.sustain && rate_ok) {
    // Plan for the mean of the sustained requests.
    const int n = std::min<int>(options_.sustain, static_cast<int>(recent_.size()));
    Characteristics t{};
    double skew = 0.0;
    // The mean miss-ratio curve when every sustained request's graph has one.
    std::array<double, kernels::GatherLocality::kLevels> miss{};
    bool localities = true;
    for (int i = 0; i < n; ++i) {
      const auto& r = recent_[recent_.size() - 1 - static_cast<std::size_t>(i)];
      localities = localities && r.locality.known();
      for (std::size_t l = 0; l < miss.size(); ++l) miss[l] += r.locality.miss[l];
      t.nodes += r.nodes;
      t.nnz += r.nnz;
      t.feature_len += r.feature_len;
      t.seq_len += r.seq_len;
      t.window += r.window;
      skew += r.degree_skew;
    }
    t.nodes /= n;
    t.nnz /= n;
    t.feature_len /= n;
    t.seq_len /= n;
    t.window /= n;
    t.degree_skew = skew / n;
    if (localities)
      for (std::size_t l = 0; l < miss.size(); ++l) t.locality.miss[l] = static_cast<float>(miss[l] / n);
    DriftSignal s;
    s.characteristic = worst->name;
    s.target = t;
    const double from = worst->get(baseline_), to = worst->get(t);
    s.detail = std::string(worst->name) + " " + fmt(from) + " -> " + fmt(to) + " (" +
               (to >= from ? "+" : "") + fmt(100.0 * rel(to, from)) + "%) sustained " +
               std::to_string(streak_) + " requests";
    last_signal_ = idx;
    signalled_once_ = true;
    streak_ = 0;
    return s;
  }
  if (pending_stage_signal_ && rate_ok) {
    auto s = std::move(pending_stage_signal_);
    pending_stage_signal_.reset();
    s->target = baseline_;
    last_signal_ = idx;
    signalled_once_ = true;
    return s;
  }
  return std::nullopt;
}

void DriftDetector::observe_stage_time(int stage, double predicted_s, double measured_s, std::uint64_t request_index) {
  if (!options_.enabled || predicted_s <= 0.0 || measured_s <= 0.0 || stage < 0) return;
  if (request_index != UINT64_MAX && request_index < rebased_at_) return;
  if (static_cast<int>(stages_.size()) <= stage) stages_.resize(static_cast<std::size_t>(stage) + 1);
  StageRatio& s = stages_[static_cast<std::size_t>(stage)];
  const double ratio = measured_s / predicted_s;
  s.samples.push_back(ratio);
  if (static_cast<int>(s.samples.size()) > options_.window) s.samples.pop_front();
  if (s.base <= 0.0) {
    // The first full window after a plan sets what "as predicted" looks like for this stage
    // (systematic model bias is not drift).
    if (static_cast<int>(s.samples.size()) == options_.window)
      s.base = std::accumulate(s.samples.begin(), s.samples.end(), 0.0) / static_cast<double>(s.samples.size());
    return;
  }
  if (std::fabs(ratio / s.base - 1.0) > options_.stage_time_threshold) {
    if (++s.streak >= options_.sustain && !pending_stage_signal_) {
      DriftSignal sig;
      sig.characteristic = "stage" + std::to_string(stage) + ".time";
      sig.detail = "stage " + std::to_string(stage) + " measured/predicted " + fmt(ratio) + " vs " + fmt(s.base) +
                   " when planned, sustained " + std::to_string(s.streak) + " requests";
      pending_stage_signal_ = sig;
      s.streak = 0;
      s.base = ratio;  // do not re-signal for the same shift
    }
  } else {
    s.streak = 0;
  }
}

DriftWatch DriftDetector::watch() const {
  DriftWatch w;
  w.options = options_;
  w.streak = streak_;
  w.streak_field = streak_field_;
  w.window_requests = static_cast<int>(recent_.size());
  for (const Field& f : kFields) {
    const double base = f.get(baseline_);
    double recent = base;
    if (!recent_.empty()) {
      recent = 0.0;
      for (const Characteristics& c : recent_) recent += f.get(c);
      recent /= static_cast<double>(recent_.size());
    }
    w.fields.push_back({f.name, base, recent, rel(recent, base)});
  }
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    const StageRatio& s = stages_[i];
    const double latest = s.samples.empty() ? 0.0 : s.samples.back();
    w.stages.push_back({static_cast<int>(i), s.base, latest, s.base > 0.0 ? latest / s.base - 1.0 : 0.0});
  }
  return w;
}

}  // namespace dype::rt
