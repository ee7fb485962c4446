#include "runtime/daemon/kserve/request_timing.h"

#include <charconv>
#include <cstring>
#include <ctime>

#include "common/error.h"
#include "runtime/daemon/kserve/tensor.h"

namespace dype::rt::daemon {
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void fill_slot(std::string& body, double slot, double value) {
  static const std::string time_text = json_number_text(kServerTimeSlot), cpu_text = json_number_text(kServerCpuSlot);
  const std::string& placeholder = slot == kServerTimeSlot ? time_text : cpu_text;
  const std::size_t at = body.rfind(placeholder);  // parameters come last, after any JSON data
  if (at == std::string::npos) throw Error("response header lost its placeholder " + placeholder);
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed, 1);
  const auto n = static_cast<std::size_t>(end - text);
  if (ec != std::errc() || n > placeholder.size())
    throw Error("value " + std::to_string(value) + " does not fit its response placeholder");
  char* slot_text = body.data() + at;
  std::memset(slot_text, ' ', placeholder.size() - n);
  std::memcpy(slot_text + placeholder.size() - n, text, n);
}

}  // namespace dype::rt::daemon
