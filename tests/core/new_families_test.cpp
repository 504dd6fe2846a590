// The newer families (Qwen3, Gemma 2, Phi-3 with and without
// longrope, Mistral with a sliding window) decode greedily exactly as Hugging
// Face transformers does, and speculative decoding keeps that output, with
// the cache on and off (tests/fixtures/greedy, made by the reference).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

// Fixture models, loaded once per test process.
std::shared_ptr<const CausalLM> model(const std::string& name) { return testing_support::fixtureModel(name); }

std::vector<int64_t> runGreedy(const std::string& name, const std::vector<int64_t>& prompt, int64_t gamma,
                               bool use_cache, std::shared_ptr<const Drafter> drafter) {
  SessionOptions o;
  o.gamma = gamma;
  o.max_new_tokens = 32;
  o.use_cache = use_cache;
  o.ignore_eos = true;  // the reference never stops early
  o.record_attention = false;
  Session session(model(name), std::move(drafter), prompt, o, {});
  session.runToEnd();
  return session.generated();
}

class NewFamilyGreedy : public ::testing::TestWithParam<std::string> {};

TEST_P(NewFamilyGreedy, SpeculativeEqualsTheReferenceTargetOutput) {
  const std::string name = GetParam();
  std::ifstream in(fs::path(KVSCOPE_FIXTURES) / "greedy" / (name + ".json"));
  const auto golden = nlohmann::json::parse(in);
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["ids"].get<std::vector<int64_t>>();
    const auto no_cache = c["generated_no_cache"].get<std::vector<int64_t>>();
    const auto cached = c["generated"].get<std::vector<int64_t>>();
    const std::string where = name + " / " + c["prompt_name"].get<std::string>();
    // Drafters: none (plain decoding), prompt lookup, and the model itself
    // (every draft accepted: the catch-up and bonus paths).
    const std::vector<std::pair<std::string, std::shared_ptr<const Drafter>>> drafters = {
        {"none", nullptr}, {"n-gram", std::make_shared<NgramDrafter>(3)},
        {"self", std::make_shared<ModelDrafter>(model(name))}};
    for (const auto& [label, drafter] : drafters) {
      for (int64_t gamma : {1, 4}) {
        EXPECT_EQ(runGreedy(name, prompt, gamma, false, drafter), no_cache) << where << ", cache off, " << label;
        const bool crosses_longrope = !c["cached_matches_no_cache"].get<bool>();
        if (crosses_longrope) {
          // The reference's cached run is stale past the longrope switch: we refuse it.
          try {
            runGreedy(name, prompt, gamma, true, drafter);
            ADD_FAILURE() << where << ": a cached run across the longrope switch was accepted";
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("original_max_position_embeddings"), std::string::npos) << e.what();
          }
        } else {
          EXPECT_EQ(runGreedy(name, prompt, gamma, true, drafter), cached) << where << ", cache on, " << label;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NewFamilyGreedy,
                         ::testing::Values("qwen3-tiny", "gemma2-tiny", "phi3-tiny", "phi3-longrope-tiny",
                                           "mistral-sw-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

// Configurations kvscope cannot compute correctly are refused, never run wrong.
TEST(NewFamilyConfig, UnsupportedWindowsAreRefused) {
  nlohmann::json qwen2 = {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"vocab_size", 64},
                          {"hidden_size", 32}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                          {"intermediate_size", 64}, {"use_sliding_window", true}, {"sliding_window", 8}};
  try {
    parseModelConfig(qwen2, "config.json");
    ADD_FAILURE() << "use_sliding_window accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use_sliding_window"), std::string::npos) << e.what();
  }
  nlohmann::json gemma = qwen2;
  gemma["architectures"] = {"Gemma2ForCausalLM"};
  gemma["model_type"] = "gemma2";
  gemma.erase("use_sliding_window");
  gemma["hidden_activation"] = "relu";
  EXPECT_THROW(parseModelConfig(gemma, "config.json"), Error);
}

TEST(NewFamilyConfig, GemmaWindowsAreOnEvenLayers) {
  const ModelConfig c = loadModelConfig(std::string(KVSCOPE_FIXTURES) + "/models/gemma2-tiny/config.json");
  EXPECT_EQ(c.family, DecoderFamily::Gemma2);
  EXPECT_EQ(c.windowOf(0), 8);
  EXPECT_EQ(c.windowOf(1), 0);
  EXPECT_EQ(c.windowOf(2), 8);
  EXPECT_EQ(c.windowOf(3), 0);
  EXPECT_NEAR(c.attention_scale, 1.0 / std::sqrt(24.0), 1e-12);
}

}  // namespace
}  // namespace kvscope
