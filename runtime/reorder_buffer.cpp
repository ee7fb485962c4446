#include "runtime/reorder_buffer.h"

#include <algorithm>

namespace dype::rt {

void ReorderBuffer::reserve() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return in_flight_ < max_in_flight_; });
  ++in_flight_;
}

bool ReorderBuffer::try_reserve() {
  std::lock_guard lock(mutex_);
  if (in_flight_ >= max_in_flight_) return false;
  ++in_flight_;
  return true;
}

void ReorderBuffer::unreserve() {
  {
    std::lock_guard lock(mutex_);
    --in_flight_;
  }
  cv_.notify_all();
}

void ReorderBuffer::add_answered_by(std::uint64_t seq, std::shared_ptr<const Request> request, AnswerCallback done) {
  std::lock_guard lock(mutex_);
  Entry& e = entries_[seq];
  e.request = std::move(request);
  e.done = std::move(done);
  counters_.submitted++;
}

std::future<HostTensor> ReorderBuffer::add(std::uint64_t seq, std::shared_ptr<const Request> request,
                                           ResponseCallback callback) {
  std::lock_guard lock(mutex_);
  Entry& e = entries_[seq];
  e.request = std::move(request);
  e.callback = std::move(callback);
  counters_.submitted++;
  return e.promise.get_future();
}

std::shared_ptr<const Request> ReorderBuffer::pending(std::uint64_t seq) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(seq);
  return it == entries_.end() || it->second.ready ? nullptr : it->second.request;
}

void ReorderBuffer::complete(std::uint64_t seq, HostTensor output, std::exception_ptr error, double modelled_end_s) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(seq);
  if (it == entries_.end() || it->second.ready) return;
  it->second.ready = true;
  it->second.error = std::move(error);
  it->second.output = std::move(output);
  latest_end_s_ = std::max(latest_end_s_, modelled_end_s);
  release_ready_locked();
}

void ReorderBuffer::release_ready_locked() {
  for (;;) {
    auto it = entries_.find(next_release_);
    if (it == entries_.end() || !it->second.ready) break;
    Entry e = std::move(it->second);
    entries_.erase(it);
    if (e.callback) e.callback(next_release_, e.error ? nullptr : &e.output, e.error);
    if (!e.error && e.request && !e.request->rows_wanted().empty()) {
      try {  // the rows asked for (checked against the graph when the request was built)
        e.output = take_rows(e.output, e.request->rows_wanted());
      } catch (...) {
        e.error = std::current_exception();
      }
    }
    if (e.error) {
      try {
        std::rethrow_exception(e.error);
      } catch (const RequestCancelled&) {
        counters_.cancelled++;
      } catch (...) {
        counters_.failed++;
      }
      if (e.done) e.done(HostTensor{}, e.error);
      else e.promise.set_exception(e.error);
    } else {
      counters_.completed++;
      if (e.done) e.done(std::move(e.output), nullptr);
      else e.promise.set_value(std::move(e.output));
    }
    ++next_release_;
    --in_flight_;
  }
  cv_.notify_all();
}

void ReorderBuffer::wait_all() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return in_flight_ == 0; });
}

std::size_t ReorderBuffer::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

double ReorderBuffer::latest_modelled_end_s() const {
  std::lock_guard lock(mutex_);
  return latest_end_s_;
}

ReorderBuffer::Counters ReorderBuffer::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace dype::rt
