// Bad model directories and bad forward arguments: each gives an Error that
// names the file (or argument) and the problem; nothing crashes.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
const fs::path kLlama = fs::path(KVSCOPE_FIXTURES) / "models" / "llama-tiny";

class ModelErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvscope-model-errors-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kLlama / "config.json", dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rewrites the fixture weights through `edit` into dir_/model.safetensors.
  void writeWeights(const std::function<void(NamedTensors&)>& edit) {
    const Checkpoint ckpt = Checkpoint::open(kLlama.string());
    NamedTensors tensors;
    for (const auto& name : ckpt.names()) tensors.emplace_back(name, ckpt.load(name, torch::kFloat32));
    edit(tensors);
    saveTensors((dir_ / "model.safetensors").string(), tensors, {{"format", "pt"}});
  }

  void expectLoadError(const std::string& phrase) {
    try {
      loadCausalLM(dir_.string(), torch::kFloat32);
      FAIL() << "expected an error mentioning " << phrase;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(dir_.string()), std::string::npos) << message;
      EXPECT_NE(message.find(phrase), std::string::npos) << message;
    }
  }

  fs::path dir_;
};

TEST_F(ModelErrors, MissingTensor) {
  writeWeights([](NamedTensors& t) {
    t.erase(std::remove_if(t.begin(), t.end(), [](const auto& e) { return e.first == "model.norm.weight"; }),
            t.end());
  });
  expectLoadError("missing tensor 'model.norm.weight'");
}

TEST_F(ModelErrors, TensorShapeDisagreesWithConfig) {
  writeWeights([](NamedTensors& t) {
    for (auto& e : t) {
      if (e.first == "model.layers.0.self_attn.k_proj.weight") e.second = torch::zeros({16, 64});
    }
  });
  expectLoadError("tensor 'model.layers.0.self_attn.k_proj.weight' has shape [16, 64]");
}

TEST_F(ModelErrors, NoWeightsFile) { expectLoadError("no model.safetensors"); }

TEST_F(ModelErrors, ConfigMissingRequiredField) {
  writeWeights([](NamedTensors&) {});
  std::ofstream(dir_ / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 512})";
  expectLoadError("missing required field 'hidden_size'");
}

TEST_F(ModelErrors, UnknownArchitecture) {
  writeWeights([](NamedTensors&) {});
  std::ofstream(dir_ / "config.json") << R"({"architectures": ["T5ForConditionalGeneration"]})";
  expectLoadError("unsupported architecture 'T5ForConditionalGeneration'");
}

TEST_F(ModelErrors, BrokenSafetensors) {
  std::ofstream(dir_ / "model.safetensors", std::ios::binary) << "garbage";
  expectLoadError("model.safetensors");
}

TEST_F(ModelErrors, ShardedCheckpointLoadsLikeSingleFile) {
  const Checkpoint ckpt = Checkpoint::open(kLlama.string());
  NamedTensors first, second;
  nlohmann::json map;
  for (const auto& name : ckpt.names()) {
    const bool in_first = name.find("layers.1") == std::string::npos;
    (in_first ? first : second).emplace_back(name, ckpt.load(name, torch::kFloat32));
    map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  saveTensors((dir_ / "model-00001-of-00002.safetensors").string(), first, {});
  saveTensors((dir_ / "model-00002-of-00002.safetensors").string(), second, {}, StDType::BF16);
  std::ofstream(dir_ / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  torch::InferenceMode guard;
  auto sharded = loadCausalLM(dir_.string(), torch::kFloat32);
  auto single = loadCausalLM(kLlama.string(), torch::kFloat32);
  auto ids = torch::tensor({1, 5, 9, 300}, torch::kInt64);
  // Layer 1 went through bf16 storage: close, not identical.
  EXPECT_LE((sharded->forward(ids, 0, nullptr) - single->forward(ids, 0, nullptr)).abs().max().item<double>(), 0.5);
  EXPECT_EQ(sharded->parameterCount(), single->parameterCount());
}

// Weights stored as integers or bools would be used as if they
// were floats (embedding rows of 0/1); the load refuses them by name.
TEST_F(ModelErrors, IntegerOrBoolEmbeddingWeightsRefused) {
  for (const auto& [dtype, name] : {std::pair{torch::kInt32, "I32"}, std::pair{torch::kBool, "BOOL"}}) {
    SCOPED_TRACE(name);
    writeWeights([dtype = dtype](NamedTensors& t) {
      for (auto& e : t) {
        if (e.first == "model.embed_tokens.weight") e.second = e.second.to(dtype);
      }
    });
    expectLoadError(std::string("tensor 'model.embed_tokens.weight' is stored as ") + name +
                    ", but weights must be F32, F16, BF16 or F64");
  }
}

// An index naming 200,000 shard files took 21 s before opening any
// of them. Refused at the shard limit, within a second and bounded memory.
TEST_F(ModelErrors, ShardIndexNaming200kFiles) {
  nlohmann::json map = nlohmann::json::object();
  for (int i = 0; i < 200000; ++i) map["t" + std::to_string(i)] = "shard-" + std::to_string(i) + ".safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  const std::string index = (dir_ / "model.safetensors.index.json").string();
  hostile::expectRefused([&] { Checkpoint::open(dir_.string()); },
                         {index, "weight_map names more than 4096 shard files, the limit"});
}

// 200,000 tensor names in one shard is a large but honest index: read in
// linear time, and the missing shard is named.
TEST_F(ModelErrors, ShardIndexWith200kNamesInOneMissingShard) {
  nlohmann::json map = nlohmann::json::object();
  for (int i = 0; i < 200000; ++i) map["t" + std::to_string(i)] = "model-00001-of-00001.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  hostile::expectRefused([&] { Checkpoint::open(dir_.string()); }, {"model-00001-of-00001.safetensors"});
}

// Checkpoint tensors the config does not account for were a
// warning, so a config.json saying 1 layer over a 2-layer checkpoint ran half
// the model and said nothing.
TEST_F(ModelErrors, ConfigWithFewerLayersThanTheCheckpointRefused) {
  writeWeights([](NamedTensors&) {});
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir_ / "config.json"));
  config["num_hidden_layers"] = 1;
  std::ofstream(dir_ / "config.json", std::ios::trunc) << config.dump();
  expectLoadError("tensors that config.json does not account for (LlamaForCausalLM): 'model.layers.1.");
  expectLoadError("the checkpoint has layers up to 1 but config.json says 1 (num_hidden_layers / n_layer)");
}

TEST_F(ModelErrors, UnknownTensorRefusedByName) {
  writeWeights([](NamedTensors& t) { t.emplace_back("model.vision_tower.weight", torch::zeros({4})); });
  expectLoadError("does not account for (LlamaForCausalLM): 'model.vision_tower.weight'");
  // Buffers Hugging Face saves beside the parameters are not weights: still fine.
  writeWeights([](NamedTensors& t) { t.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", torch::ones({8})); });
  EXPECT_NO_THROW(loadCausalLM(dir_.string(), torch::kFloat32));
}

// A shard index that maps one tensor to two files loaded from
// whichever came last; now the key is named.
TEST_F(ModelErrors, ShardIndexNamingATensorTwiceRefused) {
  const std::string index = (dir_ / "model.safetensors.index.json").string();
  std::ofstream(index) << R"({"metadata": {}, "weight_map": {"model.norm.weight": "a.safetensors", )"
                       << R"("model.norm.weight": "b.safetensors"}})";
  hostile::expectRefused([&] { Checkpoint::open(dir_.string()); },
                         {index, "duplicate key 'model.norm.weight' in the object at /weight_map "});
}

TEST(ForwardErrors, IdOutOfVocabulary) {
  auto model = loadCausalLM(kLlama.string(), torch::kFloat32);
  try {
    model->forward(torch::tensor({1, 512}, torch::kInt64), 0, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 512 is outside the vocabulary (size 512)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(model->forward(torch::tensor({-1}, torch::kInt64), 0, nullptr), Error);
}

TEST(ForwardErrors, SequenceLongerThanContext) {
  auto model = loadCausalLM(kLlama.string(), torch::kFloat32);
  EXPECT_THROW(model->forward(torch::zeros({257}, torch::kInt64), 0, nullptr), Error);
}

TEST(ForwardErrors, StartPositionMustMatchCache) {
  torch::InferenceMode guard;
  auto model = loadCausalLM(kLlama.string(), torch::kFloat32);
  auto cache = model->makeCache();
  model->forward(torch::tensor({1, 2, 3}, torch::kInt64), 0, cache.get());
  EXPECT_THROW(model->forward(torch::tensor({4}, torch::kInt64), 2, cache.get()), Error);
  EXPECT_THROW(model->forward(torch::tensor({4}, torch::kInt64), 1, nullptr), Error);
}

}  // namespace
}  // namespace kvscope
