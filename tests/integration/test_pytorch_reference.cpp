// Served GNNs against PyTorch. tests/scripts/pyg_reference.py states PyG's GCNConv, GINConv (with
// and without batch norm in its MLP), SAGEConv (mean) and BasicGNN in plain PyTorch, trains nothing, writes the
// weights under PyG's names through the safetensors format, and computes the output for a random
// directed graph with duplicate and loop edges. dype loads that repository entry, runs the same
// graph and features through its CPU reference and through pipelines of every split of the kernel
// chain across emulated GPUs and FPGAs, and must agree within 1e-4 relative error. Skips, saying
// so, where Debian's python3-torch is not installed (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_temp_dir.h"
#include "../unit/test_rt_common.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "runtime/repository/model_repository.h"

namespace dype::rt {
namespace {

constexpr double kTolerance = 1e-4;

bool torch_available(std::string* why) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0) return true;
  *why = "python3-torch is not installed (Debian package; scripts/setup.sh installs it)";
  return false;
}

struct Case {
  RepositoryModel model;
  Request request;
  HostTensor expected;
  std::string torch_version;
};

// Runs tests/scripts/SCRIPT, which writes one repository entry and NAME.case.json with PyTorch;
// loads the entry into dype. The caller fills the request and the expected answer from the json.
Case run_reference(const std::string& script, const std::string& name, const std::string& args, nlohmann::json& j) {
  const auto dir = test::process_temp_dir("dype-torch-ref");
  const std::string cmd = "/usr/bin/python3 " + std::string(DYPE_SOURCE_DIR) + "/tests/scripts/" + script + " " + args +
                          " --dir " + dir.string() + " --name " + name;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  std::ifstream in(dir / (name + ".case.json"));
  j = nlohmann::json::parse(in);
  return Case{ModelRepository({dir.string()}).load(name), {}, {}, j.at("torch").get<std::string>()};
}

// A GNN written by tests/scripts/pyg_reference.py, with its graph and features.
Case make_case(const std::string& name, const std::string& args) {
  nlohmann::json j;
  Case c = run_reference("pyg_reference.py", name, args, j);
  kernels::EdgeList e;
  e.num_nodes = j.at("nodes").get<std::int64_t>();
  e.src = j.at("src").get<std::vector<std::int64_t>>();
  e.dst = j.at("dst").get<std::vector<std::int64_t>>();
  auto graph = graph_for_model(e, c.model.model->spec());
  c.request = Request::gnn(graph, make_tensor(e.num_nodes, j.at("in").get<std::int64_t>(),
                                              j.at("x").get<std::vector<float>>()));
  c.expected = make_tensor(e.num_nodes, j.at("out").get<std::int64_t>(), j.at("expected").get<std::vector<float>>());
  return c;
}

// A transformer encoder written by tests/scripts/transformer_reference.py, with its tokens.
Case make_transformer_case(const std::string& name, const std::string& args) {
  nlohmann::json j;
  Case c = run_reference("transformer_reference.py", name, args, j);
  const std::int64_t seq = j.at("seq").get<std::int64_t>(), d = j.at("d_model").get<std::int64_t>();
  c.request = Request::transformer(make_tensor(seq, d, j.at("x").get<std::vector<float>>()), j.at("window").get<std::int64_t>());
  c.expected = make_tensor(seq, d, j.at("expected").get<std::vector<float>>());
  return c;
}

bool stage_fits(hw::Device* d, const Model& m, int first, int last) {
  for (int k = first; k <= last; ++k)
    if (!d->supports(m.step(k).op)) return false;
  return true;
}

// Contiguous splits of the chain (every one, or every `stride`-th of them); stage s on 1 or 2
// devices, GPUs and FPGAs taking turns where the FPGAs' bitstream runs the stage's kernels (the
// system needs 2 GPUs per kernel).
void expect_every_split_matches(const Case& c, hw::System& sys, unsigned stride = 1) {
  const Model& m = *c.model.model;
  const auto gpus = sys.devices_of(hw::DeviceKind::gpu), fpgas = sys.devices_of(hw::DeviceKind::fpga);
  const int n = m.num_kernels();
  int plans = 0, on_fpgas = 0;
  for (unsigned mask = 0; mask < (1u << (n - 1)); mask += stride) {
    PipelineSpec spec;
    int first = 0;
    std::size_t next_gpu = 0, next_fpga = 0;
    for (int k = 0; k < n; ++k) {
      if (k != n - 1 && !((mask >> k) & 1u)) continue;
      const std::size_t s = spec.stages.size();
      PipelineStage st{first, k, {}, 0.0};
      const int count = static_cast<int>((mask + s) % 2) + 1;
      const bool on_fpga = (s + mask / 4) % 2 == 1 && next_fpga + count <= fpgas.size() &&
                           stage_fits(fpgas.front(), m, first, k);
      on_fpgas += on_fpga ? 1 : 0;
      for (int i = 0; i < count; ++i) st.devices.push_back(on_fpga ? fpgas.at(next_fpga++) : gpus.at(next_gpu++));
      spec.stages.push_back(st);
      first = k + 1;
    }
    PipelineOptions po;
    po.preload_graph = c.request.graph();
    std::vector<Completion> got;
    {
      Pipeline p(m, spec, po);
      p.submit({.seq = 0, .request = std::make_shared<Request>(c.request), .not_before_s = 0,
                .done = [&](Completion&& done) { got.push_back(std::move(done)); }});
      p.close();
      p.join();
    }
    ASSERT_EQ(got.size(), 1u) << describe(spec);
    ASSERT_FALSE(got[0].error) << describe(spec);
    EXPECT_LE(relative_error(got[0].output, c.expected), kTolerance) << describe(spec) << " vs PyTorch";
    ++plans;
  }
  EXPECT_EQ(plans, static_cast<int>(((1u << (n - 1)) + stride - 1) / stride));
  EXPECT_GT(on_fpgas, 0) << "no stage ran on an FPGA";
}

class PytorchReference : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!torch_available(&why)) GTEST_SKIP() << why;
  }
};

TEST_F(PytorchReference, GcnMatchesOnTheReferenceAndEverySplit) {
  const Case c = make_case("gcn", "--family gcn --in 12 --hidden 16 --out 5 --layers 3 --seed 3");
  EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance)
      << "torch " << c.torch_version;
  auto sys = testing::emu_system(12, 3);
  expect_every_split_matches(c, sys);
}

TEST_F(PytorchReference, GinMatchesOnTheReferenceAndEverySplit) {
  const Case c = make_case("gin", "--family gin --in 10 --hidden 8 --out 3 --layers 2 --eps 0.25 --seed 4");
  EXPECT_FLOAT_EQ(c.model.model->spec().gin_eps, 0.25f);
  EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance);
  auto sys = testing::emu_system(12, 3);
  expect_every_split_matches(c, sys);
}

TEST_F(PytorchReference, GinWithBatchNormFoldedMatches) {
  const Case c = make_case("gin-bn", "--family gin --batch-norm --in 10 --hidden 8 --out 4 --layers 3 --seed 5");
  EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance);
  auto sys = testing::emu_system(18, 3);
  expect_every_split_matches(c, sys);
}

TEST_F(PytorchReference, SageMatchesOnTheReferenceAndEverySplit) {
  const Case c = make_case("sage", "--family sage --in 12 --hidden 16 --out 5 --layers 3 --seed 7");
  EXPECT_EQ(c.model.model->spec().family, ModelFamily::sage);
  EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance);
  auto sys = testing::emu_system(12, 3);
  expect_every_split_matches(c, sys);
}

TEST_F(PytorchReference, HalfAndBfloat16WeightsAreWidenedExactly) {
  // PyTorch computes with the rounded weights it wrote, so the answers must still agree.
  for (const char* dtype : {"F16", "BF16"}) {
    const Case c = make_case(std::string("gcn-") + dtype, std::string("--family gcn --dtype ") + dtype + " --seed 6");
    EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance) << dtype;
  }
}

// nn.TransformerEncoder with the band mask: post-norm (PyTorch's default) and pre-norm, ReLU and
// GELU, windows from self-only to wider than the sequence; one layer on every split, two layers on
// the reference and a spread of splits. Attention stages go to emulated FPGAs with the SWAT image.
TEST_F(PytorchReference, TransformerPostNormMatchesOnEverySplit) {
  const Case c = make_transformer_case("tf-post", "--d-model 32 --heads 4 --ffn 48 --layers 1 --window 8 --seq 40 --seed 11");
  EXPECT_TRUE(c.model.model->spec().residual_norm);
  EXPECT_EQ(c.model.model->num_kernels(), 7);  // qkv, attention, out_proj, norm1, ffn1, ffn2, norm2
  EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance) << "torch " << c.torch_version;
  auto sys = testing::emu_system(14, 4, false, "u280-sextans-swat.yaml");
  expect_every_split_matches(c, sys);
}

TEST_F(PytorchReference, TransformerPreNormGeluMatchesOnEverySplit) {
  const Case c = make_transformer_case(
      "tf-pre", "--d-model 32 --heads 2 --ffn 40 --layers 1 --window 6 --seq 37 --norm-first --activation gelu --seed 12");
  EXPECT_TRUE(c.model.model->spec().norm_first);
  EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance);
  auto sys = testing::emu_system(14, 4, false, "u280-sextans-swat.yaml");
  expect_every_split_matches(c, sys);
}

TEST_F(PytorchReference, TransformerTwoLayersEveryWindowMatches) {
  for (const int window : {0, 1, 5, 16, 200}) {
    for (const bool pre : {false, true}) {
      const Case c = make_transformer_case(
          "tf-w" + std::to_string(window) + (pre ? "-pre" : "-post"),
          "--d-model 24 --heads 3 --ffn 32 --layers 2 --seq 33 --window " + std::to_string(window) + (pre ? " --norm-first" : "") +
              " --seed " + std::to_string(20 + window));
      EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance)
          << "window " << window << (pre ? " pre-norm" : " post-norm");
      if (window == 5) {
        auto sys = testing::emu_system(28, 4, false, "u280-sextans-swat.yaml");
        expect_every_split_matches(c, sys, 211);  // 39 of the 8192 splits
      }
    }
  }
}

TEST_F(PytorchReference, TransformerHalfPrecisionWeights) {
  for (const char* dtype : {"F16", "BF16"}) {
    const Case c = make_transformer_case(std::string("tf-") + dtype, std::string("--layers 1 --dtype ") + dtype + " --seed 13");
    EXPECT_LE(relative_error(reference_forward(*c.model.model, c.request), c.expected), kTolerance) << dtype;
  }
}

}  // namespace
}  // namespace dype::rt
