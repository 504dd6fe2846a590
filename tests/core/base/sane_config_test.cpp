// config.json, the parser's side: fields that parsed before but made every logit
// NaN or zero, ids the vocabulary lacks, keys written twice and integers
// written as floats are refused by name, within a second and without a large
// allocation. The neighbouring values that real models use still load, so
// each test tells a refusal from a config that no longer parses at all.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "tests/core/base/config_support.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

using hostile::expectRefused;
using nlohmann::json;

json phi3LongRope() {
  json j = testing_support::tinyLlamaConfig();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["model_type"] = "phi3";
  j["hidden_size"] = 64;  // head_dim 16: 8 factors each
  j["original_max_position_embeddings"] = 32;
  j["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", {1.0, 1.0, 1.05, 1.1, 1.2, 1.4, 1.7, 2.0}},
                       {"long_factor", {1.0, 1.2, 1.5, 2.0, 3.0, 4.5, 6.5, 9.0}}};
  return j;
}

json gemma2() {
  json j = testing_support::tinyLlamaConfig();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j["model_type"] = "gemma2";
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  return j;
}

class SaneConfigTest : public hostile::TempDirTest {
 protected:
  std::string writeConfig(const json& j) { return write("config.json", j.dump()); }
  ModelConfig load(const json& j) { return loadModelConfig(writeConfig(j)); }
  std::string expectConfigRefused(const json& j, std::vector<std::string> parts) {
    const std::string path = writeConfig(j);
    parts.push_back(path);
    return expectRefused([&] { loadModelConfig(path); }, parts);
  }
};

TEST_F(SaneConfigTest, LongRopeOriginalContextOfOneRefused) {
  // The cos/sin scale divides by ln(original context): ln(1) = 0 gave NaN logits.
  json j = phi3LongRope();
  j["original_max_position_embeddings"] = 1;
  expectConfigRefused(j, {"'original_max_position_embeddings' must be an integer in [2, "});
  j["original_max_position_embeddings"] = 2;
  EXPECT_EQ(load(j).rope_scaling.original_max_position_embeddings, 2);
}

TEST_F(SaneConfigTest, LongRopeFactorsFloat32CannotHoldRefused) {
  // 1e-300 is 0 in float32: 1 / (0 * base^x) made every rotary angle Inf.
  json j = phi3LongRope();
  j["rope_scaling"]["short_factor"][3] = 1e-300;
  expectConfigRefused(j, {"'rope_scaling.short_factor[3]'", "[1e-06, 1e+06]", "1e-300"});
  j = phi3LongRope();
  j["rope_scaling"]["long_factor"][7] = 1e7;
  expectConfigRefused(j, {"'rope_scaling.long_factor[7]'"});
  j["rope_scaling"]["long_factor"][7] = 1e-6;  // the edge of the range still loads
  EXPECT_EQ(load(j).rope_scaling.long_factor[7], 1e-6);
}

TEST_F(SaneConfigTest, LinearRopeFactorOutOfRangeRefused) {
  json j = testing_support::tinyLlamaConfig();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 1e-300}};
  expectConfigRefused(j, {"'factor'", "1e-300"});
}

TEST_F(SaneConfigTest, TinySoftCapsRefused) {
  // cap * tanh(x / cap) with cap 1e-300 gave all-zero (or NaN) logits.
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    json j = gemma2();
    j[key] = 1e-300;
    expectConfigRefused(j, {std::string("'") + key + "'", "0 (no cap) or a number in [1, 1e+06]", "1e-300"});
    j[key] = 0.5;
    expectConfigRefused(j, {std::string("'") + key + "'"});
  }
  json j = gemma2();
  j["final_logit_softcapping"] = nullptr;  // no cap, as Gemma 2 configs may say
  j["attn_logit_softcapping"] = 0;
  const ModelConfig off = load(j);
  EXPECT_EQ(off.final_logit_softcap, 0);
  EXPECT_EQ(off.attn_logit_softcap, 0);
  EXPECT_EQ(load(gemma2()).final_logit_softcap, 30.0);
}

TEST_F(SaneConfigTest, TokenIdsOutsideTheVocabularyRefused) {
  json j = testing_support::tinyLlamaConfig();  // vocab_size 512
  j["eos_token_id"] = 512;
  expectConfigRefused(j, {"'eos_token_id' holds 512", "vocab_size 512"});
  j["eos_token_id"] = {2, 100000};
  expectConfigRefused(j, {"'eos_token_id' holds 100000"});
  j["eos_token_id"] = 511;
  j["bos_token_id"] = 4096;
  expectConfigRefused(j, {"'bos_token_id' holds 4096"});
  j["bos_token_id"] = 1;
  EXPECT_EQ(load(j).eos_token_ids, std::vector<int64_t>{511});
}

TEST_F(SaneConfigTest, GenerationConfigIdsCheckedAgainstTheVocabulary) {
  ModelConfig config = load(testing_support::tinyLlamaConfig());
  const std::string path = write("generation_config.json", R"({"eos_token_id": [2, 9999]})");
  expectRefused([&] { mergeGenerationConfig(config, path); }, {path, "'eos_token_id' holds 9999"});
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{2}) << "a refused file changes nothing";
}

TEST_F(SaneConfigTest, DuplicateKeysRefusedByName) {
  // The last one used to win silently: 2 layers here, whatever the first said.
  const std::string text = testing_support::tinyLlamaConfig().dump();
  const std::string path = write("config.json", "{\"num_hidden_layers\": 24, " + text.substr(1));
  expectRefused([&] { loadModelConfig(path); }, {path, "duplicate key 'num_hidden_layers' in the object at /"});
  // Inside rope_scaling too, with the object's path.
  const std::string nested = write("config.json", text.substr(0, text.size() - 1) +
                                                      R"(, "rope_scaling": {"type": "linear", "factor": 2.0, "factor": 8.0}})");
  expectRefused([&] { loadModelConfig(nested); }, {"duplicate key 'factor' in the object at /rope_scaling "});
}

TEST_F(SaneConfigTest, IntegerFieldsWrittenAsFloatsRefused) {
  json j = testing_support::tinyLlamaConfig();
  j["num_hidden_layers"] = 2.5;
  expectConfigRefused(j, {"'num_hidden_layers' must be an integer", "got 2.5"});
  j = testing_support::tinyLlamaConfig();
  j["eos_token_id"] = 2.0;  // Hugging Face's readers refuse 2.0 as well
  expectConfigRefused(j, {"eos_token_id must be an integer", "got 2.0"});
}

TEST_F(SaneConfigTest, NormEpsilonOfZeroOrBelowRefused) {
  // An eps of 0 turns an all-zero row into 0 * 1/sqrt(0) = NaN; 1e-300 is 0
  // in float32. Both norms' fields, each named with its range.
  for (const char* value : {"0", "-1e-6", "1e-300"}) {
    SCOPED_TRACE(value);
    json j = testing_support::tinyLlamaConfig();
    j["rms_norm_eps"] = json::parse(value);
    expectConfigRefused(j, {"'rms_norm_eps' must be a finite number in [1e-30, 1]"});
    json g = testing_support::tinyGpt2Config();
    g["layer_norm_epsilon"] = json::parse(value);
    expectConfigRefused(g, {"'layer_norm_epsilon' must be a finite number in [1e-30, 1]"});
  }
  json j = testing_support::tinyLlamaConfig();
  j["rms_norm_eps"] = 1e-30;  // the edge still loads, as do real models' 1e-12 .. 1e-5
  EXPECT_EQ(load(j).norm_eps, 1e-30);
  j["rms_norm_eps"] = 1e-12;
  EXPECT_EQ(load(j).norm_eps, 1e-12);
}

TEST_F(SaneConfigTest, RopeThetaBelowOneRefused) {
  // theta^(-2i/d) with theta < 1 spins the slow dimensions fastest.
  // The value as the error shows it (nlohmann's number formatting).
  for (const auto& [value, shown] : std::vector<std::pair<const char*, const char*>>{
           {"0.5", "0.5"}, {"1e-6", "1e-06"}, {"0", "0"}, {"-10000", "-10000"}, {"1e13", "10000000000000.0"}}) {
    SCOPED_TRACE(value);
    json j = testing_support::tinyLlamaConfig();
    j["rope_theta"] = json::parse(value);
    expectConfigRefused(j, {"'rope_theta' must be a finite number in [1, 1e+12]", std::string("got ") + shown});
  }
  json j = testing_support::tinyLlamaConfig();
  j["rope_theta"] = 1.0;
  EXPECT_EQ(load(j).rope_theta, 1.0);
  j["rope_theta"] = 500000.0;
  EXPECT_EQ(load(j).rope_theta, 500000.0);
}

}  // namespace
}  // namespace kvscope
