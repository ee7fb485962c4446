#include "scheduler/cost_tables.h"

#include <type_traits>

#include "common/error.h"

namespace dype::sched {

CostTables::CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits)
    : CostTables(system, model, limits, false) {}

CostTables::CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits, LazyTransfers)
    : CostTables(system, model, limits, true) {}

CostTables::CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits, bool lazy)
    : n_(model.num_kernels()) {
  system.validate();
  const int kinds = static_cast<int>(system.kinds.size());
  if (n_ <= 0) throw InputError("workload", "no kernels to schedule");
  if (!limits.max_count.empty() && static_cast<int>(limits.max_count.size()) != kinds) {
    throw Error("SpaceLimits.max_count: one entry per device kind expected");
  }
  if (!limits.allowed_kinds.empty() && static_cast<int>(limits.allowed_kinds.size()) != n_) {
    throw Error("SpaceLimits.allowed_kinds: one entry per kernel expected");
  }
  offset_.push_back(0);
  for (int t = 0; t < kinds; ++t) {
    const int cap = limits.max_count.empty() ? system.kinds[t].count
                                             : std::min(limits.max_count[t], system.kinds[t].count);
    max_count_.push_back(std::max(cap, 0));
    power_.push_back(system.kinds[t].power);
    letters_.push_back(system.kinds[t].letter);
    names_.push_back(system.kinds[t].name);
    hosts_.push_back(system.host_name(t));
    for (int c = 1; c <= max_count_.back(); ++c) kc_group_.push_back({t, c});
    offset_.push_back(static_cast<int>(kc_group_.size()));
  }
  kcs_ = kc_group_.size();
  const auto n = static_cast<std::size_t>(n_);
  compute_.assign(n * n * kcs_, kInf);
  overlap_ = system.transfers == TransferMode::overlap;
  // One f_perf call per (range, kind, count): the only place the solvers touch the cost model, so
  // an expensive model (gather/scatter, regressions) is paid once per solve.
  for (int first = 0; first < n_; ++first) {
    std::uint32_t allowed = ~0u;
    for (int last = first; last < n_; ++last) {
      if (!limits.allowed_kinds.empty()) allowed &= limits.allowed_kinds[last];
      for (std::size_t kc = 0; kc < kcs_; ++kc) {
        const DeviceGroup g = kc_group_[kc];
        if (!(allowed & (1u << g.kind))) continue;
        const double t = model.compute_time_s(first, last, g);
        const std::size_t at = (static_cast<std::size_t>(first) * n + last) * kcs_ + kc;
        compute_[at] = t >= 0 ? t : kInf;
        if (compute_[at] < kInf) {
          const double x = std::min(model.copy_time_s(first, last, g), compute_[at]);
          if (x > 0) {
            if (copy_.empty()) copy_.assign(n * n * kcs_, 0.0);
            copy_[at] = x;
            const double w = std::min(model.waited_copy_time_s(first, last, g), x);
            if (w > 0) {
              if (waited_.empty()) waited_.assign(n * n * kcs_, 0.0);
              waited_[at] = w;
            }
            const double xi = std::min(model.copy_in_time_s(first, last, g), x);
            const double xo = std::min(model.copy_out_time_s(first, last, g), x);
            if (xi != x || xo != x || !cin_.empty()) {
              if (cin_.empty()) {
                cin_ = copy_;  // earlier ranges took every copy in both directions
                cout_ = copy_;
              }
              cin_[at] = xi;
              cout_[at] = xo;
            }
            const double after = model.after_first_wait_s(first, last, g);
            if (overlap_ && after > 0) {
              if (blocked_.empty()) blocked_.assign(n * n * kcs_, 0.0);
              blocked_[at] = after + model.tail_out_time_s(first, last, g);
            }
            const double fw = model.first_wait_s(first, last, g);
            if (overlap_ && fw > 0) {
              if (wait_.empty()) wait_.assign(n * n * kcs_, Wait{});
              wait_[at] = {fw, model.head_kernels_s(first, last, g), model.head_in_time_s(first, last, g)};
            }
          }
        }
        const double w = model.execute_w(first, last, g);
        if (w >= 0) {
          if (exec_w_.empty()) {
            exec_w_.assign(n * n * kcs_, 0.0);
            for (std::size_t i = 0; i < exec_w_.size(); ++i) exec_w_[i] = power_[kc_group_[i % kcs_].kind].exec_w;
          }
          exec_w_[at] = std::max(w, system.kinds[g.kind].power.idle_w);
        }
        const double cap = system.kinds[g.kind].memory_bytes;
        if (cap > 0 && compute_[at] < kInf) {
          const double need = model.footprint(first, last, g).total();
          if (need > cap) {
            if (short_.empty()) short_.assign(n * n * kcs_, 0.0);
            short_[at] = need - cap;
            compute_[at] = kInf;  // does not fit: never planned
          }
        }
      }
    }
  }
  // A stage that waits for its input can stop waiting when it takes an earlier kernel (the gap
  // before its first exchange grows): no monotonic ranges then.
  if (!wait_.empty()) ranges_grow_ = false;
  // Every range against both one-kernel extensions (ranges that end at the last kernel too: they
  // still extend to the left).
  for (int first = 0; first < n_ && ranges_grow_; ++first) {
    for (int last = first; last < n_ && ranges_grow_; ++last) {
      for (std::size_t kc = 0; kc < kcs_; ++kc) {
        const int k = static_cast<int>(kc);
        auto shrinks = [&](auto&& f) {
          return (last + 1 < n_ && f(first, last + 1, k) < f(first, last, k)) ||
                 (first > 0 && f(first - 1, last, k) < f(first, last, k));
        };
        const auto c = [&](int a, int b, int g) { return compute(a, b, g); };
        const auto so = [&](int a, int b, int g) { return solo(a, b, g); };
        const auto ci = [&](int a, int b, int g) { return copy_in(a, b, g); };
        const auto co = [&](int a, int b, int g) { return carried(0.0, a, b, g); };
        if (shrinks(c) || (overlap_ && (shrinks(so) || shrinks(ci) || shrinks(co)))) {
          ranges_grow_ = false;
          break;
        }
      }
    }
  }
  for (std::size_t kc = 0; kc < kcs_; ++kc) {
    host_in_.push_back(model.host_input_s(kc_group_[kc]));
    host_out_.push_back(model.host_output_s(kc_group_[kc]));
  }
  xout_.assign(n > 1 ? (n - 1) * kcs_ * kcs_ : 0, 0.0);
  xin_.assign(xout_.size(), 0.0);
  if (lazy) {
    lazy_ = true;
    model_ = &model;
    known_.assign(xout_.size(), 0);
    return;
  }
  for (int k = 0; k + 1 < n_; ++k) {
    for (std::size_t a = 0; a < kcs_; ++a) {
      for (std::size_t b = 0; b < kcs_; ++b) {
        const std::size_t i = (static_cast<std::size_t>(k) * kcs_ + a) * kcs_ + b;
        const CostModel::Sides x = model.transfer_sides(k, kc_group_[a], kc_group_[b]);
        xout_[i] = x.out_s;
        xin_[i] = x.in_s;
      }
    }
  }
}

void CostTables::ask(std::size_t i) const {
  if (known_[i]) return;
  const std::size_t k = i / (kcs_ * kcs_), a = i / kcs_ % kcs_, b = i % kcs_;
  const CostModel::Sides x = model_->transfer_sides(static_cast<int>(k), kc_group_[a], kc_group_[b]);
  xout_[i] = x.out_s;
  xin_[i] = x.in_s;
  known_[i] = 1;
}

void CostTables::materialise() const {
  for (std::size_t i = 0; i < known_.size(); ++i) ask(i);
}

void CostTables::set_ends(std::vector<double> entry, std::vector<double> exit) {
  if ((!entry.empty() && entry.size() != kcs_) || (!exit.empty() && exit.size() != kcs_)) {
    throw Error("CostTables::set_ends: one entry per (kind, count) group expected");
  }
  entry_ = std::move(entry);
  exit_ = std::move(exit);
}

CostTables CostTables::sub_chain(int first, int last) const {
  if (first < 0 || last >= n_ || first > last) throw Error("CostTables::sub_chain: bad kernel range");
  materialise();
  CostTables s = *this;
  s.lazy_ = false;  // every hand-off known: an eager table
  s.known_.clear();
  s.model_ = nullptr;
  s.n_ = last - first + 1;
  const auto n = static_cast<std::size_t>(n_), m = static_cast<std::size_t>(s.n_);
  const auto ranges = [&](const auto& v) {
    std::remove_cvref_t<decltype(v)> out;
    if (v.empty()) return out;
    out.resize(m * m * kcs_);
    for (std::size_t a = 0; a < m; ++a)
      for (std::size_t b = a; b < m; ++b)
        for (std::size_t kc = 0; kc < kcs_; ++kc)
          out[(a * m + b) * kcs_ + kc] = v[((a + first) * n + b + first) * kcs_ + kc];
    return out;
  };
  s.compute_ = ranges(compute_), s.copy_ = ranges(copy_), s.waited_ = ranges(waited_);
  s.cin_ = ranges(cin_), s.cout_ = ranges(cout_), s.blocked_ = ranges(blocked_), s.wait_ = ranges(wait_);
  s.short_ = ranges(short_), s.exec_w_ = ranges(exec_w_);
  const std::size_t per = kcs_ * kcs_;
  s.xout_.assign(xout_.begin() + first * per, xout_.begin() + last * per);
  s.xin_.assign(xin_.begin() + first * per, xin_.begin() + last * per);
  s.entry_ = first == 0 ? entry_ : std::vector<double>{};
  s.exit_ = last == n_ - 1 ? exit_ : std::vector<double>{};
  return s;
}

void CostTables::limit_counts(const std::vector<int>& max_count) {
  if (max_count.size() != max_count_.size()) throw Error("CostTables::limit_counts: one entry per device kind expected");
  for (std::size_t t = 0; t < max_count.size(); ++t) max_count_[t] = std::clamp(max_count[t], 0, max_count_[t]);
}

nlohmann::json CostTables::to_json() const {
  using nlohmann::json;
  json kinds = json::array();
  for (int t = 0; t < num_kinds(); ++t) {
    kinds.push_back({{"name", names_[t]}, {"host", hosts_[t]}, {"letter", std::string(1, letters_[t])},
                     {"max_count", max_count_[t]},
                     {"power_w", {{"idle", power_[t].idle_w}, {"exec", power_[t].exec_w},
                                  {"xfer", power_[t].xfer_w}}}});
  }
  auto num = [](double v) { return v < kInf ? json(v) : json(nullptr); };  // null = unsupported
  json compute = json::array();
  for (int a = 0; a < n_; ++a) {
    for (int b = a; b < n_; ++b) {
      for (int kc = 0; kc < num_kc(); ++kc) {
        compute.push_back({{"first", a}, {"last", b}, {"kind", names_[kc_group_[kc].kind]},
                           {"count", kc_group_[kc].count}, {"time_s", num(this->compute(a, b, kc))}});
      }
    }
  }
  json transfer = json::array();
  for (int k = 0; k + 1 < n_; ++k) {
    for (int a = 0; a < num_kc(); ++a) {
      for (int b = 0; b < num_kc(); ++b) {
        transfer.push_back({{"after_kernel", k},
                            {"from", {names_[kc_group_[a].kind], kc_group_[a].count}},
                            {"to", {names_[kc_group_[b].kind], kc_group_[b].count}},
                            {"out_s", num(transfer_out(k, a, b))},
                            {"in_s", num(transfer_in(k, a, b))}});
      }
    }
  }
  // Host memory legs at the pipeline's ends, already inside the first and last kernels' compute.
  json host_io = json::array();
  for (int kc = 0; kc < num_kc(); ++kc) {
    host_io.push_back({{"kind", names_[kc_group_[kc].kind]},
                       {"count", kc_group_[kc].count},
                       {"input_s", num(host_in_[static_cast<std::size_t>(kc)])},
                       {"output_s", num(host_out_[static_cast<std::size_t>(kc)])},
                       {"included_in", "compute of ranges starting at kernel 0 (input) and ending at the last kernel (output)"}});
  }
  return {{"modelled", true}, {"kernels", n_}, {"kinds", kinds}, {"compute", compute},
          {"transfer", transfer}, {"host_io", host_io}};
}

}  // namespace dype::sched
