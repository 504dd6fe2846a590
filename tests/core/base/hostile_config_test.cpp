// Hostile config.json and generation_config.json files, read from
// disk the way a model load reads them: deep nesting, numbers no double
// holds, sizes whose products would overflow, fields of the wrong kind.
// Each is refused by name within a second and a bounded amount of memory.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "tests/core/base/hostile_support.h"
#include "tests/core/base/config_support.h"

namespace kvscope {
namespace {

using hostile::expectRefused;
using hostile::nestedArrays;
using nlohmann::json;

json llamaConfig() { return testing_support::tinyLlamaConfig(); }

class HostileConfigTest : public hostile::TempDirTest {
 protected:
  std::string writeConfig(const std::string& text) { return write("config.json", text); }
  // `config` with `key` set to the JSON text `value` (numbers a DOM cannot hold).
  std::string writeConfigWith(const char* key, const std::string& value) {
    json j = llamaConfig();
    j[key] = "@@";
    std::string text = j.dump();
    text.replace(text.find("\"@@\""), 4, value);
    return writeConfig(text);
  }
  void expectConfigRefused(const std::string& path, std::vector<std::string> parts) {
    parts.push_back(path);
    expectRefused([&] { loadModelConfig(path); }, parts);
  }
};

TEST_F(HostileConfigTest, ValidFileStillLoads) {
  const ModelConfig config = loadModelConfig(writeConfig(llamaConfig().dump()));
  EXPECT_EQ(config.num_layers, 2);
  EXPECT_EQ(config.vocab_size, 512);
}

TEST_F(HostileConfigTest, Nested100000DeepInArchitectures) {
  const std::string path = writeConfigWith("architectures", nestedArrays(100000, "\"LlamaForCausalLM\""));
  expectConfigRefused(path, {"nested deeper than 32 levels", "/architectures/0/0", "config.json"});
}

TEST_F(HostileConfigTest, Nested100000DeepInRopeScaling) {
  const std::string path = writeConfigWith("rope_scaling", "{\"factor\":" + nestedArrays(100000) + "}");
  expectConfigRefused(path, {"nested deeper than 32 levels", "/rope_scaling/factor/0"});
}

TEST_F(HostileConfigTest, NumberBeyondADouble) {
  expectConfigRefused(writeConfigWith("rope_theta", "1e999"), {"malformed JSON", "number overflow parsing '1e999'"});
}

TEST_F(HostileConfigTest, IntegerFieldsHoldingHugeNumbers) {
  // Past int64: refused while parsing, with the path of the number.
  expectConfigRefused(writeConfigWith("num_hidden_layers", "18446744073709551616"),
                      {"/num_hidden_layers", "outside the range of a 64-bit integer"});
  expectConfigRefused(writeConfigWith("intermediate_size", "1e300"),
                      {"/intermediate_size", "outside the range of a 64-bit integer"});
  // Within int64 but far past any model: refused before anything is sized by it.
  expectConfigRefused(writeConfigWith("num_hidden_layers", "1e9"), {"'num_hidden_layers' must be an integer in [1, 4096]"});
}

TEST_F(HostileConfigTest, Gpt2WidthWhoseMlpWouldOverflow) {
  // GPT-2's MLP is 4 x n_embd wide: 2^62 x 4 overflows int64.
  const json gpt2{{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_embd", int64_t{1} << 62},
                  {"n_layer", 2}, {"n_head", 4}, {"vocab_size", 300}, {"n_positions", 128}};
  expectConfigRefused(writeConfig(gpt2.dump()), {"'n_embd' must be an integer in [1, 1048576]"});
}

TEST_F(HostileConfigTest, NonPositiveContextAndRopeTheta) {
  // Both used to load and fail later as NaN sampling.
  for (const char* value : {"0", "-1"}) {
    SCOPED_TRACE(value);
    expectConfigRefused(writeConfigWith("max_position_embeddings", value),
                        {"'max_position_embeddings' must be an integer in [1,"});
    expectConfigRefused(writeConfigWith("rope_theta", value), {"'rope_theta' must be a finite number in"});
  }
}

TEST_F(HostileConfigTest, ModelTypeAndActivationOfTheWrongKind) {
  expectConfigRefused(writeConfigWith("model_type", "{\"a\":1}"), {"model_type must be a string"});
  expectConfigRefused(writeConfigWith("hidden_act", "[1]"), {"hidden_act must be a string"});
}

TEST_F(HostileConfigTest, OversizedFileRefusedBeforeReading) {
  const std::string path = writeConfig(std::string());
  std::filesystem::resize_file(path, (size_t{16} << 20) + 1);  // sparse: no disk used
  expectConfigRefused(path, {"exceeds the limit of 16777216 bytes"});
}

TEST_F(HostileConfigTest, GenerationConfigHasTheSameLimits) {
  ModelConfig config = loadModelConfig(writeConfig(llamaConfig().dump()));
  const std::string deep = write("generation_config.json", "{\"eos_token_id\":" + nestedArrays(100000) + "}");
  expectRefused([&] { mergeGenerationConfig(config, deep); }, {deep, "nested deeper than 32 levels"});
  const std::string huge = write("generation_config.json", "{\"eos_token_id\":[2, 1e300]}");
  expectRefused([&] { mergeGenerationConfig(config, huge); }, {huge, "/eos_token_id/1"});
}

}  // namespace
}  // namespace kvscope
