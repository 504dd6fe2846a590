// The loader lays dense weights out column-major while converting them
// (Checkpoint::load(..., inference_layout)) instead of re-storing them after the
// load (layOutForInference), so no weight exists twice during a load. The
// loader's choice (packedForInference) must equal the model's own
// layOutForInference: checked on every family, with the row-major (training)
// construction as the reference, and the logits must be identical.
#include <gtest/gtest.h>
#include <c10/core/CPUAllocator.h>
#include <torch/types.h>

#include <atomic>
#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "core/model/bundled_models.h"
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

// Counts the bytes torch asks the CPU allocator for while it is installed.
class CountingAllocator final : public c10::Allocator {
 public:
  CountingAllocator() : inner_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(this, kPriority); }
  ~CountingAllocator() override { c10::SetCPUAllocator(inner_, kPriority); }
  c10::DataPtr allocate(size_t bytes) const override {
    allocated_ += bytes;
    return inner_->allocate(bytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  size_t allocated() const { return allocated_; }

 private:
  static constexpr uint8_t kPriority = 100;  // above the default's, and restorable at the same
  c10::Allocator* inner_;
  mutable std::atomic<size_t> allocated_{0};
};

// Bytes of the distinct storages behind a model's parameters.
size_t storedBytes(const NamedTensors& params) {
  std::set<const void*> seen;
  size_t bytes = 0;
  for (const auto& [name, tensor] : params) {
    if (seen.insert(tensor.storage().data()).second) bytes += tensor.storage().nbytes();
  }
  return bytes;
}

// The bundled target is stored in bfloat16, so every layer's q | k | v and
// gate | up are panels: the loader reads each part straight into its slice of
// one tensor in the fused order, so fusing copies nothing and the load asks
// for about the model's own bytes (fused after a part-by-part load, q | k | v
// and gate | up, two thirds of each layer, were allocated twice). Each part
// holds what loading it alone gives.
TEST(FusedLoad, PartsAreReadStraightIntoOneTensorInFusedOrder) {
  const std::string dir = bundledModelDirectory("target");
  const ModelConfig config = loadModelConfig(dir + "/config.json");
  std::unique_ptr<CausalLM> model;
  size_t allocated = 0;
  {
    CountingAllocator counting;
    model = loadCausalLM(dir, kFloat);
    allocated = counting.allocated();
  }
  const NamedTensors params = model->namedParameters();
  std::map<std::string, at::Tensor> by_name(params.begin(), params.end());
  if (!isPanels(by_name.at("model.layers.0.self_attn.q_proj.weight")))
    GTEST_SKIP() << "CPU without AVX2/FMA: no panels, nothing fused";
  const size_t stored = storedBytes(params);
  EXPECT_LT(static_cast<double>(allocated), 1.1 * static_cast<double>(stored))
      << allocated << " bytes allocated for a model of " << stored;

  const Checkpoint ckpt = Checkpoint::open(dir);
  const auto groups = LlamaModel::fusedTensorGroups(config);
  ASSERT_EQ(groups.size(), static_cast<size_t>(2 * config.num_layers));  // q|k|v and gate|up per layer
  for (const std::vector<std::string>& group : groups) {
    const char* previous_end = nullptr;
    for (const std::string& name : group) {
      const at::Tensor& part = by_name.at(name);
      const auto* begin = static_cast<const char*>(part.data_ptr());
      if (previous_end) EXPECT_EQ(begin, previous_end) << name << " follows the part before it";
      previous_end = begin + part.nbytes();
      EXPECT_TRUE(torch::equal(part, ckpt.load(name, part.options(), /*inference_layout=*/true))) << name;
    }
  }
}

TEST(FusedLoad, ADestinationOfTheWrongShapeIsRefusedByName) {
  const Checkpoint ckpt = Checkpoint::open(bundledModelDirectory("target"));
  const std::string name = "model.layers.0.self_attn.k_proj.weight";  // [64, 256]
  at::Tensor too_small = at::empty({2, 256, kPanelWidth}, kFloat);    // 32 rows
  try {
    ckpt.loadInto(name, too_small);
    FAIL() << "a 32-row destination took a 64-row weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + name + "' does not fit the 32 x 256 weight"), std::string::npos)
        << e.what();
  }
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
