#pragma once
// The status page's files (runtime/daemon/status/page/ and the vendored uPlot chart library), built
// into the binary at build time (cmake/EmbedFiles.cmake), so the page needs no file beside the
// daemon and no network:
//
//   if (const StatusAsset* a = find_status_asset("status.js")) res.set_content(std::string(a->body), std::string(a->content_type));
#include <span>
#include <string_view>

namespace dype::rt::daemon {

struct StatusAsset {
  std::string_view name;          // "index.html", "uPlot.iife.min.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every file, in the order the build listed them (generated source).
std::span<const StatusAsset> status_assets();
// The file called `name`, or nullptr.
const StatusAsset* find_status_asset(std::string_view name);

}  // namespace dype::rt::daemon
