// kvscope-cli's model commands end to end against the fixtures:
// tokenize / detokenize, logits, inspect, generate.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

// Every tokenizer fixture (the model tokenizers and the real GPT-2 / Llama-2
// ones), on a spread of its strings: empty, newlines, emoji (multi-byte
// UTF-8) and special-token literals. One process per string, so a subset
// keeps the test quick.
TEST(CliTokenize, IdsAndTextMatchTheFixtures) {
  ScratchDir dir("tokenize");
  const std::set<std::string> picked = {"empty", "two_lines", "emoji_zwj_flag", "special_gpt_eot_in_text",
                                        "special_llama_bos_eos"};
  for (const char* name : {"llama-tiny", "gpt2-tiny", "qwen2-tiny", "gpt2", "llama2"}) {
    const fs::path folder = fixturesDir() / "tokenizers" / name;
    const auto doc = readJson(folder / "encodings.json");
    int checked = 0, detokenized = 0;
    for (const auto& c : doc["cases"]) {
      if (!picked.count(c["name"].get<std::string>())) continue;
      // The real (large) tokenizers take longer to load: fewer strings.
      const bool real = std::string(name) == "gpt2" || std::string(name) == "llama2";
      if (real && c["name"] != "emoji_zwj_flag" && c["name"] != "special_gpt_eot_in_text") continue;
      const std::string text = c["text"].get<std::string>();
      const std::string label = std::string(name) + " / " + c["name"].get<std::string>();
      // The text goes through a file, byte for byte (spaces, newlines, tabs, UTF-8).
      const std::string file = dir.file("text.txt");
      {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out << text;
      }
      const auto tokenized = runJson({"tokenize", "--model", folder.string(), "--text-file", file, "--json"});
      EXPECT_EQ(tokenized["ids"], c["ids"]) << label;
      ++checked;
      const auto ids = c["ids"].get<std::vector<int64_t>>();
      if (ids.size() > 2 && detokenized < 1) {
        const auto decoded = runJson({"detokenize", "--model", folder.string(), "--ids", joinIds(ids), "--json"});
        EXPECT_EQ(decoded["text"], c["decoded"]) << label;
        ++detokenized;
      }
    }
    const bool real = std::string(name) == "gpt2" || std::string(name) == "llama2";
    EXPECT_EQ(checked, real ? 2 : static_cast<int>(picked.size())) << name;
    EXPECT_EQ(detokenized, 1) << name;
  }
}

TEST(CliTokenize, ModelDirectoryAndInlineText) {
  const auto doc = readJson(fixturesDir() / "tokenizers" / "llama-tiny" / "encodings.json");
  const auto& c = doc["cases"][1];
  const auto tokenized =
      runJson({"tokenize", "--model", modelDir("llama-tiny"), "--text", c["text"].get<std::string>(), "--json"});
  EXPECT_EQ(tokenized["ids"], c["ids"]);
  const CliResult both = runCli({"tokenize", "--model", modelDir("llama-tiny"), "--text", "a", "--text-file", "b"});
  EXPECT_TRUE(both.exited);
  EXPECT_EQ(both.exit_code, 2) << both.describe();
  const CliResult missing = runCli({"tokenize", "--model", modelDir("llama-tiny"), "--text-file", "/nonexistent.txt"});
  EXPECT_EQ(missing.exit_code, 2) << missing.describe();
  EXPECT_NE(missing.err.find("/nonexistent.txt"), std::string::npos) << missing.describe();
  const CliResult bad_id = runCli({"detokenize", "--model", modelDir("llama-tiny"), "--ids", "1,99999"});
  EXPECT_TRUE(bad_id.exited);
  EXPECT_EQ(bad_id.exit_code, 2) << bad_id.describe();
}

TEST(CliLogits, CachedArgmaxAndLogitsMatchTheFixtures) {
  for (const char* model : {"llama-tiny", "gpt2-tiny", "qwen2-tiny", "llama-tiny-draft"}) {
    const auto doc = readJson(fixturesDir() / "logits" / (std::string(model) + ".json"));
    for (const auto& c : doc["cases"]) {
      const std::string label = std::string(model) + " " + c["name"].get<std::string>();
      for (const char* mode : {"cached", "nocache", "prefill_then_step"}) {
        // The other modes once, for llama-tiny's len40.
        if (std::string(mode) != "cached" && (c["name"] != "len40" || std::string(model) != "llama-tiny")) continue;
        const auto result = runJson({"logits", "--model", modelDir(model), "--ids",
                                     joinIds(c["ids"].get<std::vector<int64_t>>()), "--mode", mode, "--json"});
        EXPECT_EQ(result["mode"], mode);
        EXPECT_EQ(result["argmax"], c[mode]["argmax"]) << label << " " << mode;
        const auto last = result["last_logits"].get<std::vector<double>>();
        const auto want = c[mode]["last_logits"].get<std::vector<double>>();
        ASSERT_EQ(last.size(), want.size()) << label;
        double worst = 0;
        for (size_t i = 0; i < last.size(); ++i) worst = std::max(worst, std::fabs(last[i] - want[i]));
        EXPECT_LE(worst, 1e-4) << label << " " << mode;
      }
    }
  }
}

TEST(CliInspect, ArchitectureAndParameterCounts) {
  const auto manifest = readJson(fixturesDir() / "manifest.json");
  for (const char* model : {"llama-tiny", "llama-tiny-draft", "gpt2-tiny", "qwen2-tiny"}) {
    const auto config = readJson(fs::path(modelDir(model)) / "config.json");
    const auto& tensors = manifest["models"][model]["tensors"];
    int64_t parameters = 0;
    for (const auto& [name, info] : tensors.items()) {
      int64_t count = 1;
      for (const auto& d : info["shape"]) count *= d.get<int64_t>();
      parameters += count;
    }
    const auto result = runJson({"inspect", modelDir(model), "--json"});
    EXPECT_EQ(result["architecture"], config["architectures"][0]) << model;
    EXPECT_EQ(result["parameters"].get<int64_t>(), parameters) << model;
    EXPECT_EQ(result["vocab_size"], config["vocab_size"]) << model;
    EXPECT_EQ(result["layers"], config.contains("n_layer") ? config["n_layer"] : config["num_hidden_layers"]) << model;
    EXPECT_EQ(result["tensors"].size(), tensors.size()) << model;
    EXPECT_EQ(result["context_length"].get<int64_t>(), 256) << model;
  }
  const CliResult missing = runCli({"inspect", "/nonexistent/model", "--json"});
  EXPECT_TRUE(missing.exited);
  EXPECT_EQ(missing.exit_code, 2) << missing.describe();
  EXPECT_NE(missing.err.find("/nonexistent/model"), std::string::npos) << missing.describe();
}

TEST(CliGenerate, IgnoreEosGivesExactlyMaxNewTokens) {
  for (const char* model : {"llama-tiny", "gpt2-tiny", "qwen2-tiny"}) {
    for (const char* cache : {"on", "off"}) {
      const auto result = runJson({"generate", "--model", modelDir(model), "--prompt-ids", "5,6,7", "--max-new", "25",
                                   "--ignore-eos", "--greedy", "--cache", cache, "--json"});
      EXPECT_EQ(result["ids"].size(), 25u) << model << " cache " << cache;
      EXPECT_EQ(result["forward_calls"].get<int64_t>(), 25) << model;
      EXPECT_FALSE(result["stopped_at_eos"].get<bool>());
    }
  }
  // Sampling with a seed is reproducible.
  const std::vector<std::string> sampled = {"generate", "--model", modelDir("llama-tiny"), "--prompt", "Once upon",
                                            "--max-new", "12", "--temperature", "0.9", "--top-k", "40", "--seed", "9",
                                            "--ignore-eos", "--json"};
  EXPECT_EQ(runJson(sampled)["ids"], runJson(sampled)["ids"]);
  // The greedy fixture through the CLI.
  const auto doc = readJson(fixturesDir() / "greedy" / "llama-tiny+llama-tiny-draft.json");
  const auto& c = doc["cases"][0];
  const auto result = runJson({"generate", "--model", modelDir("llama-tiny"), "--prompt-ids",
                               joinIds(c["ids"].get<std::vector<int64_t>>()), "--max-new", "48", "--ignore-eos",
                               "--greedy", "--json"});
  EXPECT_EQ(result["ids"], c["generated"]);
  EXPECT_EQ(result["forward_calls"], c["target_forward_calls"]);
}

}  // namespace
// A model whose vocabulary is padded past its tokenizer (qwen3-tiny:
// 512 ids, tokenizer 448) runs on padded ids and shows them as "<id N>".
TEST(CliModel, PaddedVocabularyNeverFailsARun) {
  const std::string model = modelDir("qwen3-tiny");
  const auto generated = runJson({"generate", "--model", model, "--prompt-ids", "470,471,472", "--max-new", "6",
                                  "--cache", "off", "--json"});
  const auto run = runJson({"run", "--target", model, "--ngram", "2", "--prompt-ids", "470,471,472", "--max-new", "6",
                            "--greedy", "--json"});
  EXPECT_EQ(run["ids"], generated["ids"]) << run.dump();
  EXPECT_NE(generated["text"].get<std::string>().find("<id "), std::string::npos) << generated.dump();
  const auto detok = runJson({"detokenize", "--model", model, "--ids", "5,470", "--json"});
  EXPECT_EQ(detok["ids_without_text"], nlohmann::json::array({470}));
  EXPECT_NE(detok["text"].get<std::string>().find("<id 470>"), std::string::npos);
}

}  // namespace kvscope::cli_test
