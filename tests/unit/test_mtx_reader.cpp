// Matrix Market reader: valid files parse to the right edges; every malformed file raises an
// InputError naming the file, the line and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include <unistd.h>

#include "common/error.h"
#include "graph/mtx_reader.h"

namespace dype::kernels {
namespace {

std::string data(const std::string& name) {
  return std::string(DYPE_SOURCE_DIR) + "/tests/data/graphs/" + name;
}

TEST(MtxReader, GeneralRealKeepsDirectionAndValues) {
  const EdgeList g = read_mtx(data("general_real.mtx"));
  EXPECT_EQ(g.num_nodes, 5);
  ASSERT_EQ(g.num_edges(), 6);
  ASSERT_EQ(g.weight.size(), 6u);
  // Entry (1, 2) -> edge 0 -> 1, in file order.
  EXPECT_EQ(g.src[0], 0);
  EXPECT_EQ(g.dst[0], 1);
  EXPECT_FLOAT_EQ(g.weight[0], 0.5f);
  EXPECT_EQ(g.src[1], 1);
  EXPECT_EQ(g.dst[1], 2);
  EXPECT_FLOAT_EQ(g.weight[1], -1.25f);
  EXPECT_FLOAT_EQ(g.weight[2], 2e-3f);
  EXPECT_EQ(g.src[4], 4);  // self-loop (5, 5)
  EXPECT_EQ(g.dst[4], 4);
  EXPECT_EQ(g.src[5], 0);
  EXPECT_EQ(g.dst[5], 4);
  EXPECT_FLOAT_EQ(g.weight[5], 3.5f);
}

TEST(MtxReader, ReadValuesFalseDropsWeights) {
  MtxOptions opt;
  opt.read_values = false;
  const EdgeList g = read_mtx(data("general_real.mtx"), opt);
  EXPECT_EQ(g.num_edges(), 6);
  EXPECT_TRUE(g.weight.empty());
}

TEST(MtxReader, SymmetricPatternMirrorsOffDiagonalOnly) {
  const EdgeList g = read_mtx(data("symmetric_pattern.mtx"));
  EXPECT_EQ(g.num_nodes, 4);
  EXPECT_TRUE(g.weight.empty());
  // 4 entries, one on the diagonal: 1 + 3 * 2 = 7 edges.
  ASSERT_EQ(g.num_edges(), 7);
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  for (std::int64_t e = 0; e < g.num_edges(); ++e) edges.insert({g.src[e], g.dst[e]});
  const std::set<std::pair<std::int64_t, std::int64_t>> expected = {
      {0, 0}, {1, 0}, {0, 1}, {2, 1}, {1, 2}, {3, 2}, {2, 3}};
  EXPECT_EQ(edges, expected);
}

TEST(MtxReader, SkewSymmetricNegatesMirror) {
  const EdgeList g = read_mtx(data("skew_real.mtx"));
  ASSERT_EQ(g.num_edges(), 4);
  EXPECT_EQ(g.src[0], 1);
  EXPECT_EQ(g.dst[0], 0);
  EXPECT_FLOAT_EQ(g.weight[0], 1.5f);
  EXPECT_EQ(g.src[1], 0);
  EXPECT_EQ(g.dst[1], 1);
  EXPECT_FLOAT_EQ(g.weight[1], -1.5f);
  EXPECT_FLOAT_EQ(g.weight[3], 2.0f);
}

TEST(MtxReader, IntegerFieldWithCrlfLineEndsAndPlusSign) {
  const EdgeList g = read_mtx(data("integer_crlf.mtx"));
  EXPECT_EQ(g.num_nodes, 3);
  ASSERT_EQ(g.num_edges(), 3);
  EXPECT_FLOAT_EQ(g.weight[0], 4.0f);
  EXPECT_FLOAT_EQ(g.weight[1], -7.0f);
  EXPECT_FLOAT_EQ(g.weight[2], 2.0f);
}

TEST(MtxReader, EmptyGraphHasNodesAndNoEdges) {
  const EdgeList g = read_mtx(data("empty_graph.mtx"));
  EXPECT_EQ(g.num_nodes, 7);
  EXPECT_EQ(g.num_edges(), 0);
}

TEST(MtxReader, HeaderOnly) {
  const MtxHeader h = read_mtx_header(data("symmetric_pattern.mtx"));
  EXPECT_EQ(h.field, MtxField::pattern);
  EXPECT_EQ(h.symmetry, MtxSymmetry::symmetric);
  EXPECT_EQ(h.rows, 4);
  EXPECT_EQ(h.cols, 4);
  EXPECT_EQ(h.entries, 4);
}

TEST(MtxReader, BannerIsCaseInsensitiveAndLastLineNeedsNoNewline) {
  const EdgeList g =
      parse_mtx("%%MatrixMarket MATRIX Coordinate Pattern GENERAL\n2 2 1\n2 1", "mem.mtx");
  ASSERT_EQ(g.num_edges(), 1);
  EXPECT_EQ(g.src[0], 1);
  EXPECT_EQ(g.dst[0], 0);
}

TEST(MtxReader, RectangularRejectedUnlessAllowed) {
  const std::string text = "%%MatrixMarket matrix coordinate pattern general\n2 3 1\n1 3\n";
  EXPECT_THROW(parse_mtx(text, "rect.mtx"), InputError);
  MtxOptions opt;
  opt.allow_rectangular = true;
  const EdgeList g = parse_mtx(text, "rect.mtx", opt);
  EXPECT_EQ(g.num_nodes, 3);
  EXPECT_EQ(g.dst[0], 2);
}

TEST(MtxReader, MissingFileNamesThePath) {
  try {
    read_mtx(data("does_not_exist.mtx"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does_not_exist.mtx: cannot open"), std::string::npos)
        << e.what();
  }
}

// A large generated file exercises the block reader across buffer boundaries.
TEST(MtxReader, LargeFileAcrossBufferBoundaries) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("dype_mtx_large_" + std::to_string(::getpid()) + ".mtx");
  const std::int64_t n = 1000;
  const std::int64_t entries = 400000;  // ~6 MB: more than one 4 MiB block
  {
    std::ofstream out(path);
    out << "%%MatrixMarket matrix coordinate real general\n" << n << " " << n << " " << entries
        << "\n";
    for (std::int64_t k = 0; k < entries; ++k) {
      out << (k % n) + 1 << ' ' << ((k * 7919) % n) + 1 << ' ' << (k % 13) * 0.25 << '\n';
    }
  }
  const EdgeList g = read_mtx(path);
  std::filesystem::remove(path);
  ASSERT_EQ(g.num_edges(), entries);
  for (std::int64_t k = 0; k < entries; k += 997) {
    ASSERT_EQ(g.src[k], k % n);
    ASSERT_EQ(g.dst[k], (k * 7919) % n);
    ASSERT_FLOAT_EQ(g.weight[k], static_cast<float>((k % 13) * 0.25));
  }
}

struct BadCase {
  const char* file;
  const char* expected;  // substring of what(): "<file>:<line>: <problem>"
};

class MtxMalformed : public ::testing::TestWithParam<BadCase> {};

TEST_P(MtxMalformed, ErrorNamesFileLineAndProblem) {
  const BadCase& c = GetParam();
  try {
    read_mtx(data(c.file));
    FAIL() << c.file << ": expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(c.expected), std::string::npos) << "got: " << what;
    EXPECT_NE(what.find(data(c.file)), std::string::npos) << "path missing: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, MtxMalformed,
    ::testing::Values(
        BadCase{"bad_banner.mtx", "bad_banner.mtx:1: expected a '%%MatrixMarket"},
        BadCase{"bad_field.mtx", "bad_field.mtx:1: banner field 'quaternion'"},
        BadCase{"array_format.mtx", "array_format.mtx:1: dense 'array' format"},
        BadCase{"row_zero.mtx", "row_zero.mtx:6: row index 0 out of range [1, 1000]"},
        BadCase{"col_too_big.mtx", "col_too_big.mtx:4: column index 5 out of range [1, 4]"},
        BadCase{"negative_count.mtx", "negative_count.mtx:2: size line: entry count -2 is negative"},
        BadCase{"too_many_entries.mtx", "too_many_entries.mtx:2: size line: 5 entries do not fit"},
        BadCase{"truncated.mtx", "truncated.mtx:5: file ends after 3 of 5 declared entries"},
        BadCase{"nan_value.mtx", "nan_value.mtx:4: value is NaN"},
        BadCase{"inf_value.mtx", "inf_value.mtx:3: value '1e999' is infinite"},
        BadCase{"trailing_garbage.mtx", "trailing_garbage.mtx:4: trailing garbage 'extra'"},
        BadCase{"trailing_data.mtx", "trailing_data.mtx:5: trailing data after the 2 declared"},
        BadCase{"not_integer.mtx", "not_integer.mtx:4: column index 'x3' is not an integer"},
        BadCase{"missing_value.mtx", "missing_value.mtx:4: entry has no value"},
        BadCase{"symmetric_rect.mtx", "symmetric_rect.mtx:2: a symmetric matrix must be square"},
        BadCase{"missing_size.mtx", "missing_size.mtx:2: file ends before the size line"},
        BadCase{"empty.mtx", "empty.mtx:1: empty file"},
        BadCase{"binary.mtx", "binary.mtx:1: expected a '%%MatrixMarket"}));

TEST(MtxReader, InMemoryErrorsUseTheGivenName) {
  try {
    parse_mtx("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 1.5\n", "upload");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "upload:3");
    EXPECT_NE(e.problem().find("'1.5' is not an integer"), std::string::npos) << e.what();
  }
}

TEST(MtxReader, SkewSymmetricDiagonalRejected) {
  EXPECT_THROW(parse_mtx("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1\n",
                         "skew.mtx"),
               InputError);
}

TEST(MtxReader, ValueOverflowingFloatRejected) {
  try {
    parse_mtx("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1e300\n", "big.mtx");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("big.mtx:3: value '1e300'"), std::string::npos)
        << e.what();
  }
}

// Never a crash: every prefix of a valid file, and random byte corruptions of it, either parse or
// raise InputError (an ASan build turns any out-of-bounds access here into a failure).
TEST(MtxReader, TruncationsAndCorruptionsOnlyRaiseInputError) {
  const std::string valid =
      "%%MatrixMarket matrix coordinate real symmetric\n% c\n4 4 4\n1 1 1.5\n2 1 -2\n"
      "3 2 3e1\n4 3 4.25\n";
  int parsed = 0;
  int rejected = 0;
  auto attempt = [&](const std::string& text) {
    try {
      const EdgeList g = parse_mtx(text, "fuzz.mtx");
      for (std::int64_t e = 0; e < g.num_edges(); ++e) {
        ASSERT_LT(g.src[e], g.num_nodes);
        ASSERT_LT(g.dst[e], g.num_nodes);
      }
      ++parsed;
    } catch (const InputError& e) {
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.mtx:", 0), 0u) << e.what();
      ++rejected;
    }
  };
  for (std::size_t len = 0; len <= valid.size(); ++len) attempt(valid.substr(0, len));
  std::uint64_t state = 12345;
  const char alphabet[] = "0123456789 \t\n\r%.-+eEnaif";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = valid;
    for (int k = 0; k < 3; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const auto pos = static_cast<std::size_t>((state >> 33) % text.size());
      text[pos] = alphabet[(state >> 13) % (sizeof(alphabet) - 1)];
    }
    attempt(text);
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

// A real graph shipped by a Debian package (python3-libpysal, in scripts/setup.sh): the queen
// contiguity graph of Virginia's 136 counties, a symmetric relation stored as a general matrix.
TEST(MtxReader, RealGraphFromDebianPackage) {
  const std::filesystem::path path =
      "/usr/lib/python3/dist-packages/libpysal/examples/virginia/virginia_queen.mtx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not installed (python3-libpysal)";
  const EdgeList g = read_mtx(path);
  EXPECT_EQ(g.num_nodes, 136);
  ASSERT_EQ(g.num_edges(), 586);
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  for (std::int64_t e = 0; e < g.num_edges(); ++e) {
    EXPECT_NE(g.src[e], g.dst[e]) << "a county does not neighbour itself";
    edges.insert({g.src[e], g.dst[e]});
  }
  EXPECT_EQ(edges.size(), 586u) << "no repeated entries";
  for (const auto& [s, d] : edges) EXPECT_TRUE(edges.count({d, s})) << s << " -> " << d;
}

}  // namespace
}  // namespace dype::kernels
