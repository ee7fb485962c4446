#include "kernels/gpu/launch_plan.h"

#include <algorithm>

namespace dype::kernels::gpu {

std::int64_t window_band(std::int64_t seq_len, std::int64_t window) {
  return std::min<std::int64_t>(2 * (window / 2) + 1, std::max<std::int64_t>(seq_len, 1));
}

std::string format_error(std::string_view device, std::string_view call, int code,
                         std::string_view name, std::string_view text) {
  std::string s;
  s.append(device).append(": ").append(call).append(" failed: ").append(name);
  s.append(" (").append(std::to_string(code)).append(")");
  if (!text.empty()) s.append(": ").append(text);
  return s;
}

}  // namespace dype::kernels::gpu
