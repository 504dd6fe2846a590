// Hostile tokenizer.json files: deep component chains, deep
// patterns and merges, integers that are not integers, special ids outside
// the vocabulary, and components that blow up at encode/decode time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/model/tokenizer/tokenizer.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

using hostile::expectRefused;
using hostile::nestedArrays;
using nlohmann::json;

// A valid byte-level tokenizer ("a", "b", "ab").
json minimal() {
  return json::parse(R"({
    "added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
}

// `section` replaced by a Sequence of that kind nested `depth` times around
// `leaf`, written as text (a DOM this deep could not even be dumped).
std::string deepSequence(const char* section, const char* list, size_t depth, const std::string& leaf) {
  std::string open, close;
  for (size_t i = 0; i < depth; ++i) {
    open += std::string(R"({"type":"Sequence",")") + list + "\":[";
    close += "]}";
  }
  json t = minimal();
  t[section] = "@@";
  std::string text = t.dump();
  text.replace(text.find("\"@@\""), 4, open + leaf + close);
  return text;
}

class HostileTokenizerTest : public hostile::TempDirTest {
 protected:
  std::string writeTokenizer(const std::string& text) { return write("tokenizer.json", text); }
  std::string writeTokenizer(const json& t) { return writeTokenizer(t.dump()); }
  void expectLoadRefused(const std::string& text, std::vector<std::string> parts) {
    const std::string path = writeTokenizer(text);
    parts.push_back(path);
    expectRefused([&] { Tokenizer::fromFile(path); }, parts);
  }
  void expectLoadRefused(const json& t, const std::vector<std::string>& parts) { expectLoadRefused(t.dump(), parts); }
};

TEST_F(HostileTokenizerTest, Sequences100000DeepInEverySection) {
  struct Kind {
    const char* section;
    const char* list;
    const char* leaf;
  };
  const Kind kinds[] = {{"normalizer", "normalizers", R"({"type":"NFC"})"},
                        {"pre_tokenizer", "pretokenizers", R"({"type":"ByteLevel"})"},
                        {"decoder", "decoders", R"({"type":"ByteLevel"})"},
                        {"post_processor", "processors", R"({"type":"ByteLevel"})"}};
  for (const Kind& kind : kinds) {
    SCOPED_TRACE(kind.section);
    expectLoadRefused(deepSequence(kind.section, kind.list, 100000, kind.leaf),
                      {"nested deeper than 64 levels", std::string("/") + kind.section + "/" + kind.list});
  }
}

TEST_F(HostileTokenizerTest, SequencesWithinTheLimitStillLoad) {
  const std::string path = writeTokenizer(deepSequence("normalizer", "normalizers", 25, R"({"type":"NFC"})"));
  EXPECT_EQ(Tokenizer::fromFile(path)->encode("ab", false), (std::vector<int64_t>{2}));
}

TEST_F(HostileTokenizerTest, DeepSplitPattern) {
  json t = minimal();
  t["pre_tokenizer"] = "@@";
  std::string text = t.dump();
  text.replace(text.find("\"@@\""), 4,
               R"({"type":"Split","behavior":"Isolated","pattern":{"Regex":)" + nestedArrays(100000) + "}}");
  expectLoadRefused(text, {"nested deeper than 64 levels", "/pre_tokenizer/pattern/Regex/0"});
  // Shallow but wrong: the error shows a summary, not the value.
  t["pre_tokenizer"] = json::parse(R"({"type":"Split","behavior":"Isolated","pattern":{"Regex":[[1,2,3]]}})");
  expectLoadRefused(t, {"pattern Regex must be a string, got an array of 1 elements"});
}

TEST_F(HostileTokenizerTest, DeepMergesEntry) {
  json t = minimal();
  t["model"]["merges"] = "@@";
  std::string text = t.dump();
  text.replace(text.find("\"@@\""), 4, "[" + nestedArrays(100000, "\"a\"") + "]");
  expectLoadRefused(text, {"nested deeper than 64 levels", "/model/merges/0"});
  t["model"]["merges"] = json::parse(R"([["a", ["b"]]])");
  expectLoadRefused(t, {"model.merges[0][1] must be a string"});
}

TEST_F(HostileTokenizerTest, VocabularyIdsThatAreNotIntegers) {
  for (const char* id : {"1e300", "18446744073709551616", "-9.2e18", "1.5", "2.0", "-1", "true"}) {
    SCOPED_TRACE(id);
    json t = minimal();
    t["model"]["vocab"]["a"] = "@@";
    std::string text = t.dump();
    text.replace(text.find("\"@@\""), 4, id);
    expectLoadRefused(text, {"vocab", "a"});  // the path (limits) or the field (read)
  }
  json t = minimal();
  t["model"]["vocab"]["a"] = 2.0;
  expectLoadRefused(t, {"token 'a' id must be an integer", "got 2.0"});
  t["model"]["vocab"]["a"] = 1000000000;
  expectLoadRefused(t, {"token 'a' id must be an integer in [0, 1048579]"});
}

TEST_F(HostileTokenizerTest, AddedTokenIds) {
  json t = minimal();
  t["added_tokens"] = json::parse(R"([{"id": 1.5, "content": "<s>"}])");
  expectLoadRefused(t, {"added_tokens[0].id must be an integer"});
  t["added_tokens"] = json::parse(R"([{"id": -3, "content": "<s>"}])");
  expectLoadRefused(t, {"added_tokens[0].id must be an integer", "got -3"});
  t["added_tokens"] = json::parse(R"([{"id": 3, "content": 5}])");
  expectLoadRefused(t, {"added_tokens[0].content must be a string"});
  t["added_tokens"] = json::parse(R"([{"id": 4000000000, "content": "<s>"}])");
  expectLoadRefused(t, {"far beyond"});
}

TEST_F(HostileTokenizerTest, PostProcessorIdsMustBeInTheVocabulary) {
  json t = minimal();
  t["post_processor"] = json::parse(R"({"type":"TemplateProcessing","single":"<s> $A",
      "special_tokens":{"<s>":{"id":"<s>","ids":[-9200000000000000000],"tokens":["<s>"]}}})");
  expectLoadRefused(t, {"post_processor.special_tokens['<s>'].ids[0] must be an integer"});
  t["post_processor"]["special_tokens"]["<s>"]["ids"] = {5000};
  expectLoadRefused(t, {"post_processor adds token id 5000, which is not in the vocabulary (size 3)"});
  t["post_processor"] = json::parse(R"({"type":"BertProcessing","cls":["[CLS]", 1e18],"sep":["[SEP]", 1]})");
  expectLoadRefused(t, {"post_processor.cls[1] must be an integer"});
  t["post_processor"] = json::parse(R"({"type":"RobertaProcessing","cls":["<s>", 0],"sep":["</s>", 77]})");
  expectLoadRefused(t, {"post_processor adds token id 77"});
  // In range: encode emits exactly those ids.
  t["post_processor"] = json::parse(R"({"type":"RobertaProcessing","cls":["a", 0],"sep":["b", 1]})");
  EXPECT_EQ(Tokenizer::fromFile(writeTokenizer(t))->encode("ab"), (std::vector<int64_t>{0, 2, 1}));
}

TEST_F(HostileTokenizerTest, StripDecoderCounts) {
  json t = minimal();
  t["decoder"] = json::parse(R"({"type":"Strip","content":" ","start":1e300,"stop":0})");
  expectLoadRefused(t, {"/decoder/start", "outside the range of a 64-bit integer"});
  t["decoder"] = json::parse(R"({"type":"Strip","content":" ","start":-1,"stop":0})");
  expectLoadRefused(t, {"decoder Strip start must be an integer in [0, 1048576]", "got -1"});
}

// 16 Replace steps with an empty regex: each multiplies the text, 3^16 x.
json chainedEmptyReplace(const char* kind) {
  json steps = json::array();
  for (int i = 0; i < 16; ++i)
    steps.push_back({{"type", "Replace"}, {"pattern", {{"Regex", ""}}}, {"content", "ab"}});
  json t = minimal();
  if (std::string(kind) == "normalizer") {
    t["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
  } else {
    t["decoder"] = {{"type", "Sequence"}, {"decoders", steps}};
  }
  return t;
}

TEST_F(HostileTokenizerTest, ChainedEmptyRegexReplaceNormalizers) {
  const std::string path = writeTokenizer(chainedEmptyReplace("normalizer"));
  const auto tokenizer = Tokenizer::fromFile(path);
  expectRefused([&] { tokenizer->encode(std::string(1000, 'a')); },
                {path, "normalizer Replace would make more than 20096 bytes", "16 x its size + 4096"});
}

TEST_F(HostileTokenizerTest, ChainedEmptyRegexReplaceDecoders) {
  const std::string path = writeTokenizer(chainedEmptyReplace("decoder"));
  const auto tokenizer = Tokenizer::fromFile(path);
  expectRefused([&] { tokenizer->decode(std::vector<int64_t>(1000, 2)); }, {path, "decoder", "would make more than"});
  expectRefused([&] { tokenizer->tokenText(2); }, {path, "decoder", "would make more than"});
}

TEST_F(HostileTokenizerTest, CatastrophicBacktrackingPreTokenizer) {
  json t = minimal();
  t["pre_tokenizer"] = json::parse(R"({"type":"Split","pattern":{"Regex":"(a+)+$"},"behavior":"Isolated"})");
  const std::string path = writeTokenizer(t);
  const auto tokenizer = Tokenizer::fromFile(path);
  EXPECT_EQ(tokenizer->encode("aab", false).size(), 2u);  // harmless on short text
  expectRefused([&] { tokenizer->encode(std::string(33, 'a') + "b"); },
                {path, "regex '(a+)+$'", "time limit", "catastrophic backtracking"});
}

TEST_F(HostileTokenizerTest, CatastrophicBacktrackingNormalizer) {
  json t = minimal();
  t["normalizer"] = json::parse(R"({"type":"Replace","pattern":{"Regex":"(a|aa)+$"},"content":"b"})");
  const std::string path = writeTokenizer(t);
  const auto tokenizer = Tokenizer::fromFile(path);
  expectRefused([&] { tokenizer->encode(std::string(60, 'a') + "b"); }, {path, "regex '(a|aa)+$'", "time limit"});
}

TEST_F(HostileTokenizerTest, TokenizerConfigDeep) {
  writeTokenizer(minimal());
  const std::string config = write("tokenizer_config.json", "{\"bos_token\":" + nestedArrays(100000) + "}");
  expectRefused([&] { Tokenizer::fromDirectory(dir_.string()); },
                {config, "nested deeper than 64 levels", "tokenizer_config.json"});
}

// A key written twice kept the last value (a vocabulary giving
// "a" two ids loaded as whichever came last); refused with the key's name and
// the object's path, in tokenizer.json and tokenizer_config.json alike.
TEST_F(HostileTokenizerTest, DuplicateKeysRefusedByName) {
  std::string text = minimal().dump();
  text.replace(text.find(R"("a":0)"), 5, R"("a":0,"a":1)");
  expectLoadRefused(text, {"duplicate key 'a' in the object at /model/vocab "});
  text = minimal().dump();
  text.replace(text.find(R"("added_tokens")"), 0, R"("decoder":null,)");
  expectLoadRefused(text, {"duplicate key 'decoder' in the object at / "});

  writeTokenizer(minimal());
  const std::string config = write("tokenizer_config.json", R"({"bos_token": "a", "added_tokens_decoder": )"
                                                            R"({"0": {"content": "a"}, "0": {"content": "b"}}})");
  expectRefused([&] { Tokenizer::fromDirectory(dir_.string()); },
                {config, "duplicate key '0' in the object at /added_tokens_decoder "});
  write("tokenizer_config.json", R"({"bos_token": "a", "added_tokens_decoder": {"0": {"content": "a"}}})");
  EXPECT_NO_THROW(Tokenizer::fromDirectory(dir_.string()));
}

TEST_F(HostileTokenizerTest, HugeTokenizerFileRefusedBeforeReading) {
  const std::string path = writeTokenizer(std::string());
  std::filesystem::resize_file(path, (size_t{128} << 20) + 1);  // sparse: no disk used
  expectRefused([&] { Tokenizer::fromFile(path); }, {path, "exceeds the limit of 134217728 bytes"});
}

}  // namespace
}  // namespace kvscope
