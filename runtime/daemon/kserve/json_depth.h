#pragma once
// A nesting bound checked on JSON text before it is parsed. nlohmann::json and the code that walks
// a parsed document recurse once per level, so a small body nested 20,000 deep ('[[[[...') would
// overflow a worker's stack and kill the daemon; counting brackets first costs one pass over the
// bytes and refuses such a body with a 400 that names the limit.
//
//   check_json_depth(body, "request body");   // InputError past kMaxJsonDepth levels
#include <cstddef>
#include <string>
#include <string_view>

namespace dype::rt::daemon {

// Deeper than any protocol document needs (an infer request is ~6 levels with a 2-D data array).
inline constexpr std::size_t kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text`, brackets inside strings (and escaped quotes)
// not counted. Stops counting at `limit` + 1, so a hostile body costs no more than a good one.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

// Throws InputError(`what`, "JSON nested deeper than 64 levels") when `text` is nested too deep.
void check_json_depth(std::string_view text, const std::string& what);

}  // namespace dype::rt::daemon
