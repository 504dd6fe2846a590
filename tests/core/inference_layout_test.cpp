// The loader lays dense weights out column-major while converting them
// (Checkpoint::load(..., inference_layout)) instead of re-storing them after the
// load (layOutForInference), so no weight exists twice during a load. The
// loader's choice (packedForInference) must equal the model's own
// layOutForInference: checked on every family, with the row-major (training)
// construction as the reference, and the logits must be identical.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <set>
#include <string>

#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"
#include "core/model/dense.h"
#include "core/model/gpt2_model.h"
#include "core/model/llama_model.h"
#include "core/model/model_config.h"
#include "tests/core/session_test_support.h"

namespace kvscope {
namespace {

using testing_support::modelDir;

const auto kFloat = torch::TensorOptions().dtype(torch::kFloat32);

bool loaderPacks(const ModelConfig& config, const TensorSpec& spec) {
  return config.arch == Architecture::Gpt2 ? Gpt2Model::packedForInference(config, spec)
                                           : LlamaModel::packedForInference(config, spec);
}

// Parameter names stored in an inference layout (panels, or column-major
// [out, in] with strides (1, out); core/model/dense.h).
std::set<std::string> packedNames(const CausalLM& model) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : model.namedParameters()) {
    if (isInferenceLayout(tensor)) names.insert(name + (isPanels(tensor) ? " (panels)" : " (column-major)"));
  }
  return names;
}

// The checkpoint's tensors as stored (row-major), under canonical names.
NamedTensors rowMajorTensors(const std::string& dir, const ModelConfig& config) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  NamedTensors tensors;
  for (const TensorSpec& spec : expectedTensors(config)) {
    std::string stored = spec.name;
    if (!ckpt.has(stored) && stored.rfind("transformer.", 0) == 0) stored = stored.substr(12);
    tensors.emplace_back(spec.name, ckpt.load(stored, kFloat));
  }
  return tensors;
}

class InferenceLayoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(InferenceLayoutTest, LoaderLaysOutWhatTheModelWouldAndNothingElse) {
  const std::string dir = modelDir(GetParam());
  const ModelConfig config = loadModelConfig(dir + "/config.json");

  std::set<std::string> predicted;
  for (const TensorSpec& spec : expectedTensors(config)) {
    if (loaderPacks(config, spec)) predicted.insert(spec.name);
  }
  ASSERT_FALSE(predicted.empty()) << "every family has at least a packed head";

  // Reference: the training construction, then the model's own re-layout.
  auto reference = buildCausalLM(config, rowMajorTensors(dir, config), kFloat, dir);
  EXPECT_TRUE(packedNames(*reference).empty());
  reference->layOutForInference();
  const std::set<std::string> laid_out = packedNames(*reference);
  std::set<std::string> laid_out_names;
  for (const std::string& name : laid_out) laid_out_names.insert(name.substr(0, name.find(" (")));
  EXPECT_EQ(laid_out_names, predicted);

  // The loader lays them out while converting (it never re-stores).
  auto loaded = loadCausalLM(dir, kFloat);
  EXPECT_EQ(packedNames(*loaded), laid_out);  // the same layout, tensor by tensor

  // Same values: the two models compute bit-identical logits.
  const at::Tensor ids = torch::tensor({1, 5, 9, 2, 7}, torch::kInt64);
  torch::InferenceMode guard;
  const at::Tensor expected = reference->forward(ids, 0, nullptr);
  const at::Tensor actual = loaded->forward(ids, 0, nullptr);
  EXPECT_TRUE(torch::equal(expected, actual));
}

INSTANTIATE_TEST_SUITE_P(Families, InferenceLayoutTest,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "qwen2-tiny", "qwen3-tiny", "gemma2-tiny",
                                           "phi3-tiny", "mistral-sw-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = (c == '-') ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace kvscope
