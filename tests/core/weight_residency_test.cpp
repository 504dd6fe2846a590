// Weights kept in their stored dtype (core/model/weight_residency.h): every
// fixture family, written as a bfloat16 and a float16 checkpoint, loads with
// its dense weights in that dtype (half the bytes) and computes the logits of
// the same checkpoint widened to float32 at load, in every kind of forward:
// a prefill over all rows, decode steps, a verify pass and a 12-row re-feed.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"
#include "core/model/dense.h"
#include "core/model/few_rows.h"
#include "core/model/model_config.h"
#include "core/model/weight_residency.h"
#include "tests/core/session_test_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testing_support::modelDir;

const auto kFloatOptions = torch::TensorOptions().dtype(torch::kFloat32);

// The bound: the two paths' logits within 1e-6, the same argmax.
constexpr double kResidencyTolerance = 1e-6;

// A copy of fixture `name` whose floating tensors are stored as `storage`.
fs::path sixteenBitCopy(const std::string& name, StDType storage) {
  const fs::path out = fs::temp_directory_path() /
                       ("kvscope_residency_" + std::to_string(::getpid()) + "_" + name + "_" + stDTypeName(storage));
  fs::create_directories(out);
  const fs::path source = modelDir(name);
  for (const char* file : {"config.json", "generation_config.json"}) {
    if (fs::exists(source / file)) fs::copy_file(source / file, out / file, fs::copy_options::overwrite_existing);
  }
  const Checkpoint ckpt = Checkpoint::open(source.string());
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const std::string& tensor : ckpt.names()) tensors.emplace_back(tensor, ckpt.load(tensor, kFloatOptions));
  saveTensors((out / "model.safetensors").string(), tensors, {{"format", "pt"}}, storage);
  return out;
}

int64_t residentBytes(const CausalLM& model) {
  int64_t total = 0;
  for (const auto& [dtype, bytes] : residentBytesByDtype(model)) total += bytes;
  return total;
}

// Ids spread over the vocabulary (deterministic).
at::Tensor spreadIds(int64_t n, int64_t vocab, int64_t salt) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 37 + salt * 11 + 5) % vocab);
  return torch::tensor(ids, torch::kInt64);
}

// Every forward kind on both models, compared.
void expectSameLogits(const CausalLM& stored, const CausalLM& widened, const std::string& what) {
  c10::InferenceMode guard;
  const int64_t vocab = stored.config().vocab_size;
  const int64_t context = std::min<int64_t>(stored.config().contextLength(), 64);
  const at::Tensor prompt = spreadIds(std::min<int64_t>(24, context - 20), vocab, 1);  // [P]
  auto compare = [&](const at::Tensor& a, const at::Tensor& b, const std::string& step) {
    ASSERT_EQ(a.scalar_type(), torch::kFloat32) << what << ", " << step;
    ASSERT_EQ(a.sizes(), b.sizes()) << what << ", " << step;
    EXPECT_LE((a - b).abs().max().item<double>(), kResidencyTolerance) << what << ", " << step;
    EXPECT_TRUE(torch::equal(a.argmax(-1), b.argmax(-1))) << what << ", " << step;
  };
  // Without a cache: every row's logits.
  compare(stored.forward(prompt, 0, nullptr), widened.forward(prompt, 0, nullptr), "no-cache forward, all rows");
  auto cache_a = stored.makeCache(), cache_b = widened.makeCache();
  int64_t pos = prompt.size(0);
  compare(stored.forward(prompt, 0, cache_a.get()), widened.forward(prompt, 0, cache_b.get()), "prefill");
  // Decode steps (1 row), a verify pass (5 rows) and a 12-row re-feed (two
  // register passes sharing each weight block).
  for (const int64_t rows : {1, 1, 5, 12, 1}) {
    const at::Tensor ids = spreadIds(rows, vocab, pos);
    compare(stored.forward(ids, pos, cache_a.get()), widened.forward(ids, pos, cache_b.get()),
            std::to_string(rows) + " row(s) at position " + std::to_string(pos));
    pos += rows;
  }
}

class WeightResidencyFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightResidencyFamilies, SixteenBitWeightsStaySoAndGiveTheWidenedLogits) {
  if (!fewRowsCpuSupported()) GTEST_SKIP() << "CPU without AVX2: 16-bit weights are widened at load";
  for (const StDType storage : {StDType::BF16, StDType::F16}) {
    const fs::path dir = sixteenBitCopy(GetParam(), storage);
    const std::string what = GetParam() + " stored as " + stDTypeName(storage);
    const auto stored = loadCausalLM(dir.string(), kFloatOptions, WeightResidency::Stored);
    const auto widened = loadCausalLM(dir.string(), kFloatOptions, WeightResidency::Float32);
    const auto sixteen = storage == StDType::BF16 ? torch::kBFloat16 : torch::kFloat16;

    // Widened at load, nothing is 16-bit; kept, every matrix is (the head
    // and the layers' projections), and the model takes little more than half.
    int64_t sixteen_bit_matrices = 0;
    for (const auto& [name, tensor] : widened->namedParameters()) EXPECT_EQ(tensor.scalar_type(), torch::kFloat32) << name;
    for (const auto& [name, tensor] : stored->namedParameters()) {
      const bool matrix = tensor.dim() >= 2;
      if (matrix) EXPECT_EQ(tensor.scalar_type(), sixteen) << what << ": " << name << " was widened at load";
      if (!matrix) EXPECT_EQ(tensor.scalar_type(), torch::kFloat32) << what << ": " << name;
      sixteen_bit_matrices += matrix ? 1 : 0;
    }
    EXPECT_GE(sixteen_bit_matrices, 4) << what;
    EXPECT_LT(static_cast<double>(residentBytes(*stored)), 0.55 * static_cast<double>(residentBytes(*widened))) << what;

    expectSameLogits(*stored, *widened, what);
    fs::remove_all(dir);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WeightResidencyFamilies,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "llama-tiny-draft", "qwen2-tiny", "qwen3-tiny",
                                           "gemma2-tiny", "phi3-tiny", "phi3-longrope-tiny", "mistral-sw-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// The bundled models are stored as bfloat16: loaded by default, they stay so
// (the model file's bytes, not twice them).
TEST(WeightResidency, BundledTargetKeepsItsBfloat16Weights) {
  if (!fewRowsCpuSupported()) GTEST_SKIP() << "CPU without AVX2: 16-bit weights are widened at load";
  const std::string dir = bundledModelDirectory("target");
  const auto model = loadCausalLM(dir, kFloatOptions);
  const auto by_dtype = residentBytesByDtype(*model);
  ASSERT_TRUE(by_dtype.count("BFloat16")) << "the bundled target's weights were widened at load";
  const auto file_bytes = static_cast<double>(fs::file_size(fs::path(dir) / "model.safetensors"));
  EXPECT_LT(static_cast<double>(residentBytes(*model)), 1.1 * file_bytes);
  const auto widened = loadCausalLM(dir, kFloatOptions, WeightResidency::Float32);
  EXPECT_EQ(residentBytesByDtype(*widened).count("BFloat16"), 0u);
  EXPECT_GT(static_cast<double>(residentBytes(*widened)), 1.9 * file_bytes);
}

TEST(WeightResidency, ParsesTheOptionAndNamesABadValue) {
  EXPECT_EQ(parseWeightResidency("stored"), WeightResidency::Stored);
  EXPECT_EQ(parseWeightResidency("fp32"), WeightResidency::Float32);
  EXPECT_STREQ(weightResidencyName(WeightResidency::Float32), "fp32");
  try {
    parseWeightResidency("bf16", "--weights");
    FAIL() << "accepted 'bf16'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--weights"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'bf16'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope
