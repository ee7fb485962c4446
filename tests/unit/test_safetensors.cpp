// The safetensors reader refuses every malformed header with the file, the tensor and the problem
// named, reads F32/F16/BF16 exactly (F16 checked against numpy's widening of all 65,536 bit
// patterns), and refuses NaN/Inf weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../test_safetensors_file.h"
#include "../test_temp_dir.h"
#include "common/error.h"
#include "runtime/repository/safetensors.h"

namespace dype::rt {
namespace {

std::string dir() { return test::process_temp_dir("dype-safetensors").string(); }

// The InputError message of opening `path` (and reading tensor `read` as F32 when given).
std::string refusal(const std::string& path, const std::string& read = "") {
  try {
    SafetensorsFile f = SafetensorsFile::open(path);
    if (!read.empty()) f.to_f32(read);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string refusal_of(const std::string& header, std::vector<unsigned char> data = {}, const std::string& read = "") {
  const std::string p = dir() + "/m.safetensors";
  test::write_safetensors_raw(p, header, data);
  return refusal(p, read);
}

#define EXPECT_REFUSED(message, needle) \
  EXPECT_NE(std::string(message).find(needle), std::string::npos) << (message)

TEST(Safetensors, ReadsWellFormedF32) {
  const std::string p = dir() + "/ok.safetensors";
  test::write_safetensors(p, {{"w", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {3}, {-1, 0, 1}}, {"s", {}, {7}}, {"z", {0, 4}, {}}});
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"b", "s", "w", "z"}));
  EXPECT_EQ(f.to_f32("w", {{2, 3}}), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.to_f32("s"), std::vector<float>{7});  // a scalar is one element
  EXPECT_TRUE(f.to_f32("z").empty());
  EXPECT_EQ(f.tensor("w").elements(), 6);
  EXPECT_REFUSED(refusal(p, "nope"), "no tensor 'nope'");
  try {
    f.to_f32("w", {{3, 2}});
    ADD_FAILURE() << "shape accepted";
  } catch (const InputError& e) {
    EXPECT_REFUSED(e.what(), "tensor 'w': shape [2, 3], expected [3, 2]");
  }
}

TEST(Safetensors, RefusesBadFilesAndHeaderLengths) {
  EXPECT_REFUSED(refusal(""), "no path given");
  EXPECT_REFUSED(refusal(dir() + "/missing.safetensors"), "cannot open");
  EXPECT_REFUSED(refusal(dir()), "not a regular file");
  const std::string p = dir() + "/short.safetensors";
  std::ofstream(p) << "abc";
  EXPECT_REFUSED(refusal(p), "file of 3 bytes is shorter than the 8-byte header length");
  std::string big(8, '\0');
  big[0] = '\x40';  // 64-byte header in a 10-byte file
  std::ofstream(p, std::ios::binary | std::ios::trunc) << big << "{}";
  EXPECT_REFUSED(refusal(p), "header length 64 runs past the end of the file (10 bytes)");
  std::string huge(8, '\0');
  huge[4] = '\x01';  // 2^32
  std::ofstream(p, std::ios::binary | std::ios::trunc) << huge << "{}";
  EXPECT_REFUSED(refusal(p), "exceeds the format's limit");
}

TEST(Safetensors, RefusesMalformedHeaders) {
  EXPECT_REFUSED(refusal_of("[1, 2]"), "header is not a JSON object");
  EXPECT_REFUSED(refusal_of("{\"a\": "), "header is not valid JSON");
  EXPECT_REFUSED(refusal_of("{\"\xff\": 1}"), "header is not valid JSON");  // invalid UTF-8
  EXPECT_REFUSED(refusal_of(R"({"w": [1]})"), "tensor 'w': entry must be an object");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [1]}})"), "tensor 'w': missing 'data_offsets'");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", {0, 0, 0, 0}),
                 "tensor 'w': unknown key 'x'");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                 "dtype must be a string");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                 "unknown dtype 'F33' (the format's: F32, F16, BF16");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                 "shape must be a list");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                 "whole numbers >= 0, has -1");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                 "whole numbers >= 0, has 1.0");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
                            {0, 0, 0, 0}),
                 "more elements than can be addressed");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", {0, 0, 0, 0}),
                 "data_offsets must be two whole numbers");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", {0, 0, 0, 0}),
                 "end before they begin");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", {0, 0, 0, 0}),
                 "data_offsets [0, 8) run past the end of the data (4 bytes)");
  EXPECT_REFUSED(refusal_of(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
                 "hold 4 bytes, F32 [2] needs 8");
  EXPECT_REFUSED(refusal_of(R"({"__metadata__": {"a": 1}})"), "__metadata__.a: must be a string");
  EXPECT_REFUSED(refusal_of(R"({"__metadata__": []})"), "__metadata__: must be an object of strings");
}

TEST(Safetensors, RefusesOverlapsGapsTrailingBytesAndRepeatedNames) {
  const std::vector<unsigned char> eight(8, 0);
  EXPECT_REFUSED(refusal_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight),
                 "overlap tensor 'a'");
  EXPECT_REFUSED(refusal_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight),
                 "bytes [0, 4) of the data belong to no tensor");
  EXPECT_REFUSED(refusal_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", eight),
                 "bytes [4, 8) at the end of the data belong to no tensor");
  EXPECT_REFUSED(refusal_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                               "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight),
                 "tensor 'a': named twice in the header");
}

TEST(Safetensors, OtherDtypesAreSizedButNotReadAsWeights) {
  const std::string p = dir() + "/i64.safetensors";
  test::write_safetensors_raw(p, R"({"n": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}})",
                              std::vector<unsigned char>(8, 1));
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.tensor("n").dtype_name, "I64");
  EXPECT_REFUSED(refusal(p, "n"), "tensor 'n': dtype I64 cannot be read as weights");
}

TEST(Safetensors, HalfAndBfloat16WidenExactlyAndUnaligned) {
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), the largest subnormal, -0.
  const std::vector<std::uint16_t> half{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x8000};
  const std::vector<float> half_want{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24), std::ldexp(1023.0f, -24), -0.0f};
  // BF16: 1, the smallest subnormal 2^-133, -3.
  const std::vector<std::uint16_t> bf{0x3f80, 0x0001, 0xc040};
  const std::vector<float> bf_want{1.0f, std::ldexp(1.0f, -133), -3.0f};
  std::vector<unsigned char> data(1, 0);  // one pad byte in front: every tensor starts at an odd address
  for (std::uint16_t h : half) data.insert(data.end(), {static_cast<unsigned char>(h & 0xff), static_cast<unsigned char>(h >> 8)});
  for (std::uint16_t h : bf) data.insert(data.end(), {static_cast<unsigned char>(h & 0xff), static_cast<unsigned char>(h >> 8)});
  const float three = 3.5f;
  data.resize(data.size() + 4);
  std::memcpy(data.data() + data.size() - 4, &three, 4);
  const std::string p = dir() + "/half.safetensors";
  test::write_safetensors_raw(p, R"({"pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                     "h": {"dtype": "F16", "shape": [6], "data_offsets": [1, 13]},
                                     "b": {"dtype": "BF16", "shape": [3], "data_offsets": [13, 19]},
                                     "f": {"dtype": "F32", "shape": [1], "data_offsets": [19, 23]}})",
                              data);
  const SafetensorsFile f = SafetensorsFile::open(p);
  const auto h = f.to_f32("h");
  for (std::size_t i = 0; i < half_want.size(); ++i) {
    EXPECT_EQ(h[i], half_want[i]) << i;
    EXPECT_EQ(std::signbit(h[i]), std::signbit(half_want[i])) << i;
  }
  EXPECT_EQ(f.to_f32("b"), bf_want);
  EXPECT_EQ(f.to_f32("f"), std::vector<float>{3.5f});
}

TEST(Safetensors, NanAndInfWeightsAreRefused) {
  const std::string p = dir() + "/nan.safetensors";
  test::write_safetensors(p, {{"w", {3}, {1.0f, std::nanf(""), 2.0f}}, {"v", {2}, {INFINITY, 0.0f}}});
  EXPECT_REFUSED(refusal(p, "w"), "tensor 'w': NaN at flat index 1");
  EXPECT_REFUSED(refusal(p, "v"), "tensor 'v': Inf at flat index 0");
  test::write_safetensors_raw(p, R"({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", {0, 0, 0, 0x7c});
  EXPECT_REFUSED(refusal(p, "h"), "tensor 'h': Inf at flat index 1");
}

TEST(Safetensors, HalfWideningEqualsNumpyForEveryBitPattern) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "Debian's python3-numpy is not installed (scripts/setup.sh installs it)";
  }
  // numpy writes all 65,536 F16 patterns (finite ones; inf/NaN are refused by design) and its own
  // float32 widening of them.
  const std::string p = dir() + "/all-halves.safetensors";
  const std::string script =
      "import json,struct,sys,numpy as np\n"
      "h=np.arange(65536,dtype=np.uint32).astype(np.uint16).view(np.float16)\n"
      "h=h[np.isfinite(h)]\n"
      "f=h.astype(np.float32)\n"
      "a=h.tobytes();b=f.tobytes()\n"
      "hd=json.dumps({'h':{'dtype':'F16','shape':[len(h)],'data_offsets':[0,len(a)]},"
      "'f':{'dtype':'F32','shape':[len(f)],'data_offsets':[len(a),len(a)+len(b)]}}).encode()\n"
      "open(sys.argv[1],'wb').write(struct.pack('<Q',len(hd))+hd+a+b)\n";
  const std::string py = dir() + "/all_halves.py";
  std::ofstream(py) << script;
  ASSERT_EQ(std::system(("/usr/bin/python3 " + py + " " + p).c_str()), 0);
  const SafetensorsFile f = SafetensorsFile::open(p);
  const auto mine = f.to_f32("h"), numpy = f.to_f32("f");
  ASSERT_EQ(mine.size(), 63488u);  // 65,536 less the 2,048 inf/NaN patterns
  for (std::size_t i = 0; i < mine.size(); ++i) {
    std::uint32_t a, b;
    std::memcpy(&a, &mine[i], 4);
    std::memcpy(&b, &numpy[i], 4);
    ASSERT_EQ(a, b) << "pattern " << i;
  }
}

}  // namespace
}  // namespace dype::rt
