// .npy files as numpy writes and reads them: float32/float64 in any rank (float64 narrowed),
// every malformed header refused naming the file, and what dype writes numpy reads back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "../test_temp_dir.h"
#include "common/error.h"
#include "runtime/repository/npy.h"

namespace dype::rt {
namespace {

bool numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }
std::string dir() { return test::process_temp_dir("dype-npy").string(); }
int py(const std::string& code) { return std::system(("/usr/bin/python3 -c \"import numpy as np; " + code + "\"").c_str()); }

std::string refusal(const std::string& path) {
  try {
    read_npy(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Npy, ReadsWhatNumpyWrites) {
  if (!numpy()) GTEST_SKIP() << "Debian's python3-numpy is not installed (scripts/setup.sh installs it)";
  const std::string d = dir();
  ASSERT_EQ(py("np.save('" + d + "/a.npy', (np.arange(6, dtype=np.float32) - 2.5).reshape(2, 3)); "
               "np.save('" + d + "/b.npy', np.array([0.1, 1e-3], dtype=np.float64)); "
               "np.save('" + d + "/c.npy', np.zeros((0, 4), dtype=np.float32)); "
               "np.save('" + d + "/f.npy', np.asfortranarray(np.ones((2, 3), dtype=np.float32))); "
               "np.save('" + d + "/i.npy', np.arange(3)); "
               "np.save('" + d + "/be.npy', np.ones(3, dtype='>f4'))"),
            0);
  const NpyArray a = read_npy(d + "/a.npy");
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  const NpyArray b = read_npy(d + "/b.npy");
  EXPECT_EQ(b.shape, std::vector<std::int64_t>{2});
  EXPECT_EQ(b.data, (std::vector<float>{0.1f, 1e-3f}));
  EXPECT_EQ(read_npy(d + "/c.npy").shape, (std::vector<std::int64_t>{0, 4}));
  EXPECT_NE(refusal(d + "/f.npy").find("fortran_order arrays are not read"), std::string::npos);
  EXPECT_NE(refusal(d + "/i.npy").find("is not read (float32 '<f4' or float64 '<f8')"), std::string::npos);
  EXPECT_NE(refusal(d + "/be.npy").find("dtype '>f4'"), std::string::npos);
}

TEST(Npy, NumpyReadsWhatDypeWrites) {
  if (!numpy()) GTEST_SKIP() << "Debian's python3-numpy is not installed (scripts/setup.sh installs it)";
  const std::string d = dir();
  write_npy(d + "/y.npy", {3, 2}, std::vector<float>{1, 2, 3, 4, 5, -6.25f});
  write_npy(d + "/v.npy", {4}, std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(py("y = np.load('" + d + "/y.npy'); assert y.dtype == np.float32 and y.shape == (3, 2) and y[2, 1] == -6.25; "
               "v = np.load('" + d + "/v.npy'); assert v.shape == (4,) and v.sum() == 10"),
            0);
  EXPECT_EQ(read_npy(d + "/y.npy").data, (std::vector<float>{1, 2, 3, 4, 5, -6.25f}));
}

TEST(Npy, RefusesMalformedFiles) {
  const std::string d = dir();
  auto file = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(d + "/" + name, std::ios::binary) << bytes;
    return d + "/" + name;
  };
  auto v1 = [](const std::string& header, const std::string& data) {
    std::string s = std::string("\x93NUMPY\x01\x00", 8);
    s.push_back(static_cast<char>(header.size() & 0xff));
    s.push_back(static_cast<char>(header.size() >> 8));
    return s + header + data;
  };
  EXPECT_NE(refusal(d + "/missing.npy").find("cannot open"), std::string::npos);
  EXPECT_NE(refusal(file("t.npy", "hello")).find("not a .npy file"), std::string::npos);
  EXPECT_NE(refusal(file("v9.npy", std::string("\x93NUMPY\x09\x00\x00\x00", 10))).find("version 9"), std::string::npos);
  EXPECT_NE(refusal(file("long.npy", std::string("\x93NUMPY\x01\x00\xff\x7f", 10))).find("runs past the end"), std::string::npos);
  EXPECT_NE(refusal(file("key.npy", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "abcd")))
                .find("unknown header key 'x'"),
            std::string::npos);
  EXPECT_NE(refusal(file("lack.npy", v1("{'descr': '<f4', 'shape': (1,)}", "abcd"))).find("lacks one of"), std::string::npos);
  EXPECT_NE(refusal(file("size.npy", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "abcd")))
                .find("holds 4 data bytes, the shape needs 8"),
            std::string::npos);
  EXPECT_NE(refusal(file("neg.npy", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "")))
                .find("whole numbers"),
            std::string::npos);
  EXPECT_NE(refusal(file("huge.npy", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999,)}", "")))
                .find("too large"),
            std::string::npos);
}

}  // namespace
}  // namespace dype::rt
