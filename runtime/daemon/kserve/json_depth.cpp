#include "runtime/daemon/kserve/json_depth.h"

#include "common/error.h"

namespace dype::rt::daemon {

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void check_json_depth(std::string_view text, const std::string& what) {
  if (json_nesting_depth(text) > kMaxJsonDepth)
    throw InputError(what, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
}

}  // namespace dype::rt::daemon
