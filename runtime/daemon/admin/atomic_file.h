#pragma once
// Writes a whole file so that a crash at any point leaves either the old contents or the new, never
// a mix: a temporary file beside it is written and synced, renamed over the old one, and the folder
// synced so the rename itself survives. dype::Error naming the path when any step fails.
#include <string>

namespace dype::rt::daemon {

void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace dype::rt::daemon
