// Bad input must give a kvscope::Error that names the file (or the call)
// and the problem, never a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TokenizerErrorTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("kvscope_tok_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  // A minimal valid byte-level tokenizer.json ("a", "b", "ab").
  static nlohmann::json minimal() {
    return nlohmann::json::parse(R"({
      "added_tokens": [], "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
      "post_processor": null, "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
  }
  // Expects loading to throw an Error whose message contains every part.
  void expectLoadError(const nlohmann::json& tokenizer, const std::vector<std::string>& parts) {
    const std::string path = write("tokenizer.json", tokenizer.dump());
    try {
      Tokenizer::fromFile(path);
      FAIL() << "no error for " << tokenizer.dump();
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }

  fs::path dir_;
};

TEST_F(TokenizerErrorTest, MinimalFileLoads) {
  const auto tok = Tokenizer::fromFile(write("tokenizer.json", minimal().dump()));
  EXPECT_EQ(tok->encode("ab"), (std::vector<int64_t>{2}));
  EXPECT_EQ(tok->decode({2, 0}), "aba");
}

TEST_F(TokenizerErrorTest, ConfigWithNullAndObjectSpecialTokens) {
  nlohmann::json t = minimal();
  t["added_tokens"] = {{{"id", 3}, {"content", "</s>"}, {"special", true}}};
  write("tokenizer.json", t.dump());
  write("tokenizer_config.json",
        R"({"bos_token": null, "eos_token": {"__type": "AddedToken", "content": "</s>"}})");
  const auto tok = Tokenizer::fromDirectory(dir_.string());
  EXPECT_EQ(tok->bosId(), std::nullopt);
  EXPECT_EQ(tok->eosId(), 3);
  EXPECT_EQ(tok->vocabSize(), 4);
  EXPECT_EQ(tok->encode("a</s>b"), (std::vector<int64_t>{0, 3, 1}));
  EXPECT_EQ(tok->decode({0, 3, 1}), "ab");
  EXPECT_EQ(tok->decode({0, 3, 1}, false), "a</s>b");
}

TEST_F(TokenizerErrorTest, UnknownModelType) {
  nlohmann::json t = minimal();
  t["model"] = {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}, {"unk_token", "a"}};
  expectLoadError(t, {"unsupported tokenizer model type 'WordPiece'"});
}

TEST_F(TokenizerErrorTest, UnknownNormalizerType) {
  nlohmann::json t = minimal();
  t["normalizer"] = {{"type", "BertNormalizer"}};
  expectLoadError(t, {"unsupported normalizer type 'BertNormalizer'"});
}

TEST_F(TokenizerErrorTest, UnknownPreTokenizerType) {
  nlohmann::json t = minimal();
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "UnicodeScripts"}}}}};
  expectLoadError(t, {"unsupported pre-tokenizer type 'UnicodeScripts'"});
}

TEST_F(TokenizerErrorTest, UnknownDecoderType) {
  nlohmann::json t = minimal();
  t["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
  expectLoadError(t, {"unsupported decoder type 'WordPiece'"});
}

TEST_F(TokenizerErrorTest, UnknownPostProcessorType) {
  nlohmann::json t = minimal();
  t["post_processor"] = {{"type", "Whatever"}};
  expectLoadError(t, {"unsupported post-processor type 'Whatever'"});
}

TEST_F(TokenizerErrorTest, BadRegex) {
  nlohmann::json t = minimal();
  t["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "(unclosed"}}},
                        {"behavior", "Isolated"}};
  expectLoadError(t, {"cannot compile regex '(unclosed'"});
}

TEST_F(TokenizerErrorTest, MergeWithTokenOutsideVocabulary) {
  nlohmann::json t = minimal();
  t["model"]["merges"] = {"a b", "b c"};
  expectLoadError(t, {"merge #1 'b c'", "token 'c' is not in the vocabulary"});
}

TEST_F(TokenizerErrorTest, MalformedMergeString) {
  nlohmann::json t = minimal();
  t["model"]["merges"] = {"a b c"};
  expectLoadError(t, {"merge #0 'a b c'"});
}

TEST_F(TokenizerErrorTest, WrongFieldType) {
  nlohmann::json t = minimal();
  t["model"]["vocab"]["a"] = "zero";
  expectLoadError(t, {"token 'a' id must be an integer", "\"zero\""});
  t = minimal();
  t["model"]["type"] = 7;
  expectLoadError(t, {"unexpected tokenizer.json structure"});
}

TEST_F(TokenizerErrorTest, MissingModel) {
  nlohmann::json t = minimal();
  t.erase("model");
  expectLoadError(t, {"no \"model\""});
}

TEST_F(TokenizerErrorTest, MalformedJson) {
  const std::string path = write("tokenizer.json", R"({"model": {"type": "BPE", )");
  try {
    Tokenizer::fromFile(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path + ": malformed JSON"), std::string::npos) << message;
  }
}

TEST_F(TokenizerErrorTest, MalformedTokenizerConfig) {
  write("tokenizer.json", minimal().dump());
  const std::string config = write("tokenizer_config.json", "{bos_token: <s>}");
  try {
    Tokenizer::fromDirectory(dir_.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(config + ": malformed JSON"), std::string::npos)
        << e.what();
  }
}

TEST_F(TokenizerErrorTest, MissingFile) {
  const std::string path = (dir_ / "nope.json").string();
  try {
    Tokenizer::fromFile(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot open file");
  }
}

TEST_F(TokenizerErrorTest, DirectoryWithoutTokenizerJson) {
  write("tokenizer.model", "not really sentencepiece");
  try {
    Tokenizer::fromDirectory(dir_.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tokenizer.json: file not found"), std::string::npos) << message;
    EXPECT_NE(message.find("tokenizer.model"), std::string::npos) << message;
  }
}

// Ids past the tokenizer (a model's padded vocabulary rows, as in
// real Qwen2/Qwen3 checkpoints) never fail a decode: they show as "<id N>".
TEST(TokenizerDecodeErrors, PaddedIdsShowAsPlaceholders) {
  const auto tok = Tokenizer::fromDirectory(std::string(KVSCOPE_FIXTURES) + "/tokenizers/gpt2-tiny");
  ASSERT_EQ(tok->vocabSize(), 512);
  const std::string five = tok->decode({5});
  EXPECT_EQ(tok->decode({5, 512}), five + "<id 512>");
  EXPECT_EQ(tok->decode({5, 600, 5}), five + "<id 600>" + five);
  EXPECT_EQ(tok->tokenText(512), "<id 512>");
  EXPECT_FALSE(tok->hasText(512));
  EXPECT_TRUE(tok->hasText(5));
  EXPECT_THROW(tok->decode({-1}), Error);
  EXPECT_THROW(tok->tokenString(100000), Error);
  EXPECT_THROW(tok->tokenText(-5), Error);
  EXPECT_FALSE(tok->isSpecial(100000));
}

}  // namespace
}  // namespace kvscope
