#include "runtime/daemon/batching_service.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "common/error.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/metrics.h"

namespace dype::rt::daemon {

using Clock = std::chrono::steady_clock;

std::pair<std::string, BatchPolicy> parse_batch_spec(const std::string& spec) {
  const std::size_t eq = spec.find('=');
  const std::string model = eq == std::string::npos ? "" : spec.substr(0, eq);
  const std::string rest = eq == std::string::npos ? spec : spec.substr(eq + 1);
  const std::size_t slash = rest.find('/');
  auto number = [&](const std::string& text, const char* what) {
    double v = 0.0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0)
      throw InputError("--batch", "'" + spec + "': " + what + " '" + text + "' is not a non-negative number");
    return v;
  };
  BatchPolicy p;
  const double size = number(rest.substr(0, slash), "MAX_SIZE");
  if (size != static_cast<int>(size) || size > 4096)
    throw InputError("--batch", "'" + spec + "': MAX_SIZE must be a whole number up to 4096");
  p.max_size = static_cast<int>(size);
  if (slash != std::string::npos) p.max_queue_delay_us = number(rest.substr(slash + 1), "DELAY_US");
  if (eq != std::string::npos && model.empty()) throw InputError("--batch", "'" + spec + "': empty model name");
  return {model, p};
}

// --- One model's batcher -------------------------------------------------------------------------

class BatchingService::Batcher {
 public:
  Batcher(InferenceService& inner, std::string model, BatchPolicy policy)
      : inner_(inner), model_(std::move(model)), policy_(policy) {
    sender_ = std::thread([this] { send_loop(); });
    answerer_ = std::thread([this] { answer_loop(); });
  }
  ~Batcher() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    send_cv_.notify_all();
    sender_.join();  // sends what is still queued first
    {
      std::lock_guard lock(mu_);
      sender_done_ = true;
    }
    answer_cv_.notify_all();
    answerer_.join();
  }

  // The sender is woken only when this request changes what it waits for: the first request of a
  // batch (its delay starts) or a batch now full. Others join the queue without a wake-up, so a
  // request costs no thread hand-off until its batch is sent.
  std::future<HostTensor> add(Request request) {
    Member m{std::move(request), {}, {}, Clock::now()};
    std::future<HostTensor> f = m.promise.get_future();
    queue(std::move(m));
    return f;
  }
  // The same, answered through `done` (on the answering thread) instead of a future.
  void add(Request request, InferDone done) { queue(Member{std::move(request), {}, std::move(done), Clock::now()}); }

  // Sends whatever is queued now and waits until every request taken so far is answered.
  void flush_and_wait() {
    std::unique_lock lock(mu_);
    ++flushing_;
    send_cv_.notify_one();
    idle_cv_.wait(lock, [&] { return outstanding_ == 0; });
    --flushing_;
  }

  std::uint64_t batches() const { return batches_.load(); }
  const BatchPolicy& policy() const { return policy_; }
  std::uint64_t requests() const { return requests_.load(); }

 private:
  struct Member {
    Request request;
    std::promise<HostTensor> promise;
    InferDone done;  // set: the answer goes here, not to `promise`
    Clock::time_point queued;
  };
  struct Sent {
    std::future<HostTensor> y;
    std::vector<Member> members;
  };

  void queue(Member m) {
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      wake = queue_.empty();
      queued_nodes_ += m.request.graph()->nodes;
      queue_.push_back(std::move(m));
      ++outstanding_;
      wake = wake || full_locked();
    }
    if (wake) send_cv_.notify_one();
  }

  static void deliver(Member& m, HostTensor y) {
    if (m.done) m.done(std::move(y), nullptr);
    else m.promise.set_value(std::move(y));
  }

  // A batch is full: max_size requests or max_nodes nodes queued.
  bool full_locked() const {
    return static_cast<int>(queue_.size()) >= policy_.max_size || queued_nodes_ >= policy_.max_nodes;
  }

  void send_loop() {
    const auto delay = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::micro>(policy_.max_queue_delay_us));
    std::unique_lock lock(mu_);
    for (;;) {
      send_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      const auto deadline = queue_.front().queued + delay;
      send_cv_.wait_until(lock, deadline, [&] { return stop_ || flushing_ > 0 || full_locked(); });
      std::vector<Member> batch;
      std::int64_t nodes = 0;
      while (!queue_.empty() && static_cast<int>(batch.size()) < policy_.max_size &&
             (batch.empty() || nodes + queue_.front().request.graph()->nodes <= policy_.max_nodes)) {
        nodes += queue_.front().request.graph()->nodes;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_nodes_ -= nodes;
      lock.unlock();
      send(std::move(batch));
      lock.lock();
    }
  }

  // Merges and submits (submitting may wait for room in the engine: back-pressure on the queue).
  void send(std::vector<Member> batch) {
    Sent s;
    try {
      if (batch.size() == 1) {
        s.y = inner_.infer(model_, batch.front().request, nullptr);
      } else {
        std::vector<std::shared_ptr<const Graph>> graphs;
        HostTensor x;
        x.cols = batch.front().request.input().cols;
        for (const Member& m : batch) {
          graphs.push_back(m.request.graph());
          x.rows += m.request.input().rows;
        }
        x.data.reserve(static_cast<std::size_t>(x.rows * x.cols));
        for (const Member& m : batch) x.data.insert(x.data.end(), m.request.input().data.begin(), m.request.input().data.end());
        s.y = inner_.infer(model_, Request::gnn(Graph::block_diagonal(graphs), std::move(x)), nullptr);
      }
    } catch (...) {
      fail(batch, std::current_exception());
      return;
    }
    ++batches_;
    requests_ += batch.size();
    s.members = std::move(batch);
    {
      std::lock_guard lock(mu_);
      sent_.push_back(std::move(s));
    }
    answer_cv_.notify_one();
  }

  void answer_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      answer_cv_.wait(lock, [&] { return sender_done_ || !sent_.empty(); });
      if (sent_.empty()) return;
      Sent s = std::move(sent_.front());
      sent_.pop_front();
      lock.unlock();
      answer(s);
      lock.lock();
    }
  }

  void answer(Sent& s) {
    HostTensor y;
    try {
      y = s.y.get();
    } catch (...) {
      fail(s.members, std::current_exception());
      return;
    }
    if (s.members.size() == 1) {
      deliver(s.members.front(), std::move(y));
      done(1);
      return;
    }
    std::int64_t total = 0;
    for (const Member& m : s.members) total += m.request.graph()->nodes;
    if (y.rows != total) {
      fail(s.members, std::make_exception_ptr(Error("batched answer has " + std::to_string(y.rows) + " rows for " +
                                                    std::to_string(total) + " nodes")));
      return;
    }
    std::int64_t row = 0;
    for (Member& m : s.members) {
      HostTensor part;
      part.rows = m.request.graph()->nodes;
      part.cols = y.cols;
      const auto from = y.data.begin() + static_cast<std::ptrdiff_t>(row * y.cols);
      part.data.assign(from, from + static_cast<std::ptrdiff_t>(part.rows * y.cols));
      row += part.rows;
      deliver(m, std::move(part));
    }
    done(s.members.size());
  }

  void fail(std::vector<Member>& members, const std::exception_ptr& e) {
    for (Member& m : members) {
      if (m.done) m.done(HostTensor{}, e);
      else m.promise.set_exception(e);
    }
    done(members.size());
  }

  void done(std::size_t n) {
    bool idle = false;
    {
      std::lock_guard lock(mu_);
      outstanding_ -= n;
      idle = outstanding_ == 0 && flushing_ > 0;
    }
    if (idle) idle_cv_.notify_all();
  }

  InferenceService& inner_;
  const std::string model_;
  const BatchPolicy policy_;
  std::mutex mu_;
  std::condition_variable send_cv_;    // the sender: a batch started, filled, flushed, or stopping
  std::condition_variable answer_cv_;  // the answerer: a batch sent, or the sender done
  std::condition_variable idle_cv_;    // flush_and_wait: everything taken is answered
  std::deque<Member> queue_;
  std::deque<Sent> sent_;
  std::int64_t queued_nodes_ = 0;
  std::size_t outstanding_ = 0;
  int flushing_ = 0;
  bool stop_ = false, sender_done_ = false;
  std::atomic<std::uint64_t> batches_{0}, requests_{0};
  std::thread sender_, answerer_;
};

// --- The service ---------------------------------------------------------------------------------

BatchingService::BatchingService(InferenceService& inner, BatchPolicies policies)
    : inner_(inner), policies_(std::move(policies)) {}

BatchingService::~BatchingService() = default;

const BatchPolicy* BatchingService::policy_for(const std::string& model) const {
  auto it = policies_.find(model);
  if (it == policies_.end()) it = policies_.find("");
  if (it == policies_.end() || it->second.max_size <= 1) return nullptr;
  return &it->second;
}

std::optional<BatchPolicy> BatchingService::effective_policy(const std::string& model,
                                                            const std::optional<DynamicBatching>& config) const {
  auto own = policies_.find(model);
  if (own != policies_.end()) return own->second.max_size > 1 ? std::optional(own->second) : std::nullopt;
  if (config) {
    if (config->max_batch_size <= 1) return std::nullopt;
    return BatchPolicy{config->max_batch_size, config->max_queue_delay_us, config->max_nodes};
  }
  if (const BatchPolicy* all = policy_for(model)) return *all;
  return std::nullopt;
}

std::shared_ptr<BatchingService::Batcher> BatchingService::batcher(const std::string& model, const BatchPolicy& policy) {
  std::lock_guard lock(mu_);
  auto& b = batchers_[model];
  if (b && (b->policy().max_size != policy.max_size || b->policy().max_queue_delay_us != policy.max_queue_delay_us ||
            b->policy().max_nodes != policy.max_nodes)) {
    retired_.emplace_back(model, std::move(b));  // sends what it holds; new requests go to the new one
  }
  if (!b) b = std::make_shared<Batcher>(inner_, model, policy);
  return b;
}

std::future<HostTensor> BatchingService::infer(const std::string& model, Request request, std::int64_t* version) {
  // Without any --batch entry only a model's own config can batch it: one lookup of the model.
  const ModelInfo info = inner_.model(model);
  const std::optional<BatchPolicy> policy = effective_policy(model, info.batching);
  if (!policy) return inner_.infer(model, std::move(request), version);
  const auto& g = request.graph();
  // A request for some rows (node_ids) goes alone: the engine answers it with those rows only.
  if (!info.model->is_gnn() || !g || g->size_only() || g->nodes > policy->max_nodes || !request.rows_wanted().empty())
    return inner_.infer(model, std::move(request), version);
  validate_request(*info.model, request);
  if (version) *version = info.version;
  return batcher(model, *policy)->add(std::move(request));
}

bool BatchingService::try_infer(const std::string& model, Request& request, std::int64_t* version, InferDone& done) {
  const ModelInfo info = inner_.model(model);
  const std::optional<BatchPolicy> policy = effective_policy(model, info.batching);
  const auto& g = request.graph();
  if (!policy || !info.model->is_gnn() || !g || g->size_only() || g->nodes > policy->max_nodes ||
      !request.rows_wanted().empty())
    return inner_.try_infer(model, request, version, done);
  // Joining a batch never waits (the sender is the one that waits for room in the engine).
  validate_request(*info.model, request);
  if (version) *version = info.version;
  batcher(model, *policy)->add(std::move(request), std::move(done));
  return true;
}

std::pair<std::uint64_t, std::uint64_t> BatchingService::counts(const std::string& model) const {
  std::lock_guard lock(mu_);
  std::pair<std::uint64_t, std::uint64_t> n{0, 0};
  auto add = [&](const Batcher& b) {
    n.first += b.batches();
    n.second += b.requests();
  };
  if (const auto it = batchers_.find(model); it != batchers_.end()) add(*it->second);
  for (const auto& [name, b] : retired_)
    if (name == model) add(*b);
  return n;
}

std::string BatchingService::metrics_text() const {
  std::ostringstream o;
  o << inner_.metrics_text();
  std::set<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, b] : batchers_) names.insert(name);
  }
  if (names.empty()) return o.str();
  o << "# HELP dype_batches_total Batches of merged GNN requests sent to the engine (dynamic batching).\n"
       "# TYPE dype_batches_total counter\n";
  for (const std::string& name : names)
    o << "dype_batches_total{model=\"" << prometheus_label(name) << "\"} " << counts(name).first << "\n";
  o << "# HELP dype_batched_requests_total Requests answered through dynamic batching.\n"
       "# TYPE dype_batched_requests_total counter\n";
  for (const std::string& name : names)
    o << "dype_batched_requests_total{model=\"" << prometheus_label(name) << "\"} " << counts(name).second << "\n";
  return o.str();
}

void BatchingService::drain() {
  std::vector<std::shared_ptr<Batcher>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, b] : batchers_) all.push_back(b);
    for (auto& [name, b] : retired_) all.push_back(b);
  }
  for (const auto& b : all) b->flush_and_wait();
  inner_.drain();
}

}  // namespace dype::rt::daemon
