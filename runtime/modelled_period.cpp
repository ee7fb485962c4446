// modelled_period_s (runtime/pipeline.h): a pipeline's steady-state period on the virtual clock of
// emulated devices, measured by running identical requests through it.
#include "runtime/pipeline.h"

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "common/error.h"

namespace dype::rt {

double modelled_period_s(const Model& model, const PipelineSpec& spec, const Request& request, int warmup, int n) {
  if (warmup < 1 || n < 1) throw InputError("modelled_period_s", "warmup and n must be >= 1");
  auto req = std::make_shared<const Request>(request);
  PipelineOptions o;
  o.preload_graph = request.graph();
  std::mutex mu;
  std::vector<double> ends;
  std::exception_ptr error;
  {
    Pipeline p(model, spec, o);
    for (int i = 0; i < warmup + n; ++i) {
      Job j;
      j.seq = static_cast<std::uint64_t>(i);
      j.request = req;
      j.done = [&](Completion&& c) {
        std::lock_guard lock(mu);
        if (c.error && !error) error = c.error;
        ends.push_back(c.modelled_end_s);
      };
      p.submit(std::move(j));
    }
    p.close();
    p.join();
  }
  if (error) std::rethrow_exception(error);
  // Completions arrive in order (one worker per stage).
  if (ends.size() != static_cast<std::size_t>(warmup + n) || ends[static_cast<std::size_t>(warmup) - 1] < 0)
    throw Error("modelled_period_s: the pipeline has a device without a modelled clock");
  return (ends.back() - ends[static_cast<std::size_t>(warmup) - 1]) / static_cast<double>(n);
}

}  // namespace dype::rt
