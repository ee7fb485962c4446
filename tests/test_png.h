// A plot the project drew, as the tests check it: a real PNG (signature and IHDR), its size, and
// ink on it (tests/scripts/png_colours.py decodes the pixels).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace dype::test {

struct PngCheck {
  bool png = false;  // the 8-byte signature and an IHDR chunk first
  std::uint32_t width = 0, height = 0;
  double ink = -1;  // share of pixels unlike the background (the most common colour); -1 unread
};

// ink: decode the pixels too (pure Python: about a second for a large figure).
inline PngCheck check_png(const std::filesystem::path& path, bool ink = true) {
  PngCheck c;
  std::ifstream f(path, std::ios::binary);
  std::array<unsigned char, 24> head{};
  if (!f.read(reinterpret_cast<char*>(head.data()), head.size())) return c;
  constexpr std::array<unsigned char, 8> kSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  c.png = std::equal(kSignature.begin(), kSignature.end(), head.begin()) && head[12] == 'I' &&
          head[13] == 'H' && head[14] == 'D' && head[15] == 'R';
  const auto be32 = [&](int at) {
    return std::uint32_t{head[at]} << 24 | std::uint32_t{head[at + 1]} << 16 |
           std::uint32_t{head[at + 2]} << 8 | std::uint32_t{head[at + 3]};
  };
  c.width = be32(16);
  c.height = be32(20);
  if (!ink) return c;
  const std::string cmd = "python3 " + std::string(DYPE_SOURCE_DIR) +
                          "/tests/scripts/png_colours.py '" + path.string() + "' 2>/dev/null";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    unsigned w = 0, h = 0, colours = 0;
    double top_share = -1;
    if (std::fscanf(p, "%ux%u colours=%u top_share=%lf", &w, &h, &colours, &top_share) == 4 &&
        w == c.width && h == c.height)
      c.ink = 1.0 - top_share;  // the most common colour is the background
    pclose(p);
  }
  return c;
}

}  // namespace dype::test
