// config.json parsing: every supported architecture and option, and a clear
// error naming the file and problem for every unsupported or missing field.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/model_config.h"
#include "tests/core/base/config_support.h"

namespace kvscope {
namespace {

using nlohmann::json;

json llamaConfig() { return testing_support::tinyLlamaConfig(); }

void expectErrorMentions(const json& config, const std::string& what) {
  try {
    parseModelConfig(config, "/models/x/config.json");
    FAIL() << "expected an error mentioning " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/models/x/config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ParsesLlamaWithGqa) {
  const auto c = parseModelConfig(llamaConfig(), "config.json");
  EXPECT_EQ(c.arch, Architecture::Llama);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.groupSize(), 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
}

TEST(ModelConfig, QwenHasQkvBiasAndMqaDefaults) {
  auto j = llamaConfig();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["num_key_value_heads"] = 1;
  const auto c = parseModelConfig(j, "config.json");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_EQ(c.groupSize(), 4);
}

TEST(ModelConfig, ExplicitHeadDimAndAttentionBias) {
  auto j = llamaConfig();
  j["head_dim"] = 32;
  j["attention_bias"] = true;
  const auto c = parseModelConfig(j, "config.json");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
}

TEST(ModelConfig, EosListAndRopeScalingLlama3) {
  auto j = llamaConfig();
  j["vocab_size"] = 128256;  // Llama 3's: its eos ids must lie inside the vocabulary
  j["eos_token_id"] = {128001, 128009};
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const auto c = parseModelConfig(j, "config.json");
  EXPECT_EQ(c.eos_token_ids.size(), 2u);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
}

TEST(ModelConfig, Gpt2Defaults) {
  json j{{"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", 512}, {"n_embd", 64}, {"n_layer", 2},
         {"n_head", 4}, {"n_positions", 256}, {"n_inner", nullptr}};
  const auto c = parseModelConfig(j, "config.json");
  EXPECT_EQ(c.arch, Architecture::Gpt2);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.activation, "gelu_new");
}

TEST(ModelConfig, MissingRequiredFieldIsNamed) {
  auto j = llamaConfig();
  j.erase("hidden_size");
  expectErrorMentions(j, "missing required field 'hidden_size'");
}

TEST(ModelConfig, UnknownArchitectureIsNamed) {
  auto j = llamaConfig();
  j["architectures"] = {"BertForMaskedLM"};
  expectErrorMentions(j, "unsupported architecture 'BertForMaskedLM'");
}

TEST(ModelConfig, UnsupportedRopeTypeIsNamed) {
  auto j = llamaConfig();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expectErrorMentions(j, "unsupported rope_scaling type 'yarn'");
}

TEST(ModelConfig, HeadsNotMultipleOfKvHeads) {
  auto j = llamaConfig();
  j["num_key_value_heads"] = 3;
  expectErrorMentions(j, "num_key_value_heads");
}

TEST(ModelConfig, WrongFieldType) {
  auto j = llamaConfig();
  j["num_hidden_layers"] = "two";
  expectErrorMentions(j, "'num_hidden_layers' must be an integer");
}

TEST(ModelConfig, MissingFileIsNamed) {
  EXPECT_THROW(loadModelConfig("/nonexistent/config.json"), Error);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// Numbers from a stranger's config.json are range-checked before
// any conversion or allocation, and the error names the field.
TEST(ModelConfigHostile, FloatsAreRangeChecked) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"rope_theta", 0.0}, {"rope_theta", -5.0}, {"rms_norm_eps", -1.0}, {"rope_theta", 1e300}};
  for (const auto& [field, value] : cases) {
    auto j = llamaConfig();
    j[field] = value;
    expectErrorMentions(j, "'" + field + "' must be a finite number in");
  }
}

TEST(ModelConfigHostile, SizesAreBoundedBeforeAllocation) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"max_position_embeddings", 0}, {"max_position_embeddings", -3}, {"num_hidden_layers", 1000000000},
           {"hidden_size", int64_t{1} << 40}, {"vocab_size", 1e300}, {"intermediate_size", 18446744073709551615ull}}) {
    auto j = llamaConfig();
    j[field] = value;
    expectErrorMentions(j, "'" + field + "' must be an integer in");
  }
}

TEST(ModelConfigHostile, StringFieldsOfTheWrongTypeAreNamed) {
  for (const char* field : {"model_type", "hidden_act"}) {
    auto j = llamaConfig();
    j[field] = 7;
    expectErrorMentions(j, std::string(field) + " must be a string, got 7");
  }
}

TEST(ModelConfigHostile, RopeScalingNumbersAreChecked) {
  auto j = llamaConfig();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 1e300}};
  expectErrorMentions(j, "original_max_position_embeddings must be an integer in");
  j["rope_scaling"]["original_max_position_embeddings"] = 8192;
  j["rope_scaling"]["factor"] = -1.0;
  expectErrorMentions(j, "'factor' must be a finite number in");
}

TEST(ModelConfigHostile, EosIdsMustBeVocabularySizedIntegers) {
  auto j = llamaConfig();
  j["eos_token_id"] = nlohmann::json::array({2, -9});
  expectErrorMentions(j, "eos_token_id[1] must be an integer in");
}

}  // namespace
}  // namespace kvscope
