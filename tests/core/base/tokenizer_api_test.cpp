// The Tokenizer interface beyond the golden ids: per-token display text,
// BOS/EOS discovery, a Llama-3 style file end to end, bad UTF-8 input, and
// concurrent use.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/tokenizer/byte_level.h"
#include "core/model/tokenizer/hf_tokenizer.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

using Ids = std::vector<int64_t>;

std::unique_ptr<Tokenizer> fixture(const std::string& name) {
  return Tokenizer::fromDirectory(std::string(KVSCOPE_FIXTURES) + "/tokenizers/" + name);
}

int64_t idOf(const Tokenizer& tok, const std::string& token) {
  const auto id = tok.tokenToId(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(-1);
}

TEST(TokenizerApi, SpecialIdsAndSizes) {
  struct Expected { const char* name; int64_t size, bos, eos; };
  for (const Expected& e : {Expected{"gpt2", 50257, 50256, 50256},
                            Expected{"llama2", 32000, 1, 2},
                            Expected{"gpt2-tiny", 512, 511, 511},
                            Expected{"llama-tiny", 512, 1, 2},
                            Expected{"qwen2-tiny", 448, 447, 447}}) {
    SCOPED_TRACE(e.name);
    const auto tok = fixture(e.name);
    EXPECT_EQ(tok->vocabSize(), e.size);
    EXPECT_EQ(tok->bosId(), e.bos);
    EXPECT_EQ(tok->eosId(), e.eos);
    EXPECT_TRUE(tok->isSpecial(e.eos));
    EXPECT_FALSE(tok->isSpecial(5));
  }
}

// Without tokenizer_config.json: BOS from the post-processor, EOS by name.
TEST(TokenizerApi, SpecialIdsFromTokenizerJsonAlone) {
  const std::string dir = std::string(KVSCOPE_FIXTURES) + "/tokenizers/";
  const auto llama = Tokenizer::fromFile(dir + "llama-tiny/tokenizer.json");
  EXPECT_EQ(llama->bosId(), 1);
  EXPECT_EQ(llama->eosId(), 2);
  const auto gpt2 = Tokenizer::fromFile(dir + "gpt2-tiny/tokenizer.json");
  EXPECT_EQ(gpt2->bosId(), std::nullopt);
  EXPECT_EQ(gpt2->eosId(), 511);
}

TEST(TokenizerApi, TokenTextByteLevel) {
  const auto tok = fixture("gpt2");
  EXPECT_EQ(tok->tokenText(idOf(*tok, "Ġthe")), " the");
  EXPECT_EQ(tok->tokenText(idOf(*tok, "Ċ")), "\n");
  EXPECT_EQ(tok->tokenText(idOf(*tok, "Ã")), "\xC3");  // half of a UTF-8 sequence
  EXPECT_EQ(tok->tokenText(50256), "<|endoftext|>");
}

TEST(TokenizerApi, TokenTextSentencePiece) {
  const auto tok = fixture("llama2");
  EXPECT_EQ(tok->tokenText(idOf(*tok, "▁the")), " the");
  EXPECT_EQ(tok->tokenText(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->tokenString(13), "<0x0A>");
  EXPECT_EQ(tok->tokenText(idOf(*tok, "<0xE5>")), "\xE5");
  EXPECT_EQ(tok->tokenText(1), "<s>");
  // The first token of a text keeps its space in running text...
  EXPECT_EQ(tok->tokenText(idOf(*tok, "▁Hello")), " Hello");
  // ...while decode() strips the one the normalizer added.
  EXPECT_EQ(tok->decode({idOf(*tok, "▁Hello")}), "Hello");
}

TEST(TokenizerApi, InvalidUtf8IsRepairedNotRejected) {
  const auto tok = fixture("gpt2-tiny");
  EXPECT_EQ(tok->encode("a\xFF"), tok->encode("a\xEF\xBF\xBD"));
  EXPECT_EQ(tok->decode(tok->encode("x\xC3")), "x\xEF\xBF\xBD");
}

TEST(TokenizerApi, ConcurrentEncodeAgrees) {
  const auto tok = fixture("llama2");
  const std::string text = "The quick brown fox jumps over the lazy dog. Straße 日本語 🙂";
  const Ids expected = tok->encode(text);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) results[t] = tok->encode(text + std::to_string(i % 3));
      results[t] = tok->encode(text);
    });
  }
  for (auto& th : threads) th.join();
  for (const Ids& r : results) EXPECT_EQ(r, expected);
}

// A miniature of Llama-3's tokenizer.json: Split(regex) + ByteLevel without
// regex, ignore_merges, merges as pairs, BOS via Sequence[ByteLevel,
// TemplateProcessing].
nlohmann::json llama3Style() {
  nlohmann::json vocab;
  for (int b = 0; b < 256; ++b) vocab[bytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  vocab["12"] = 256;
  vocab["34"] = 257;
  vocab["45"] = 258;
  const char* regex =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  return {
      {"added_tokens",
       {{{"id", 259}, {"content", "<|begin_of_text|>"}, {"special", true}, {"normalized", false}},
        {{"id", 260}, {"content", "<|end_of_text|>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}},
          {{"type", "TemplateProcessing"},
           {"single",
            {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"special_tokens",
            {{"<|begin_of_text|>",
              {{"id", "<|begin_of_text|>"}, {"ids", {259}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"ignore_merges", true}, {"vocab", vocab},
        {"merges", nlohmann::json::array({nlohmann::json::array({"3", "4"}),
                                          nlohmann::json::array({"1", "2"}),
                                          nlohmann::json::array({"4", "5"})})}}}};
}

TEST(TokenizerApi, Llama3StyleEndToEnd) {
  const auto tok = HfTokenizer::fromJson(llama3Style(), nullptr, "llama3-style");
  // The regex cuts digits in threes before BPE: "123" + "45", so "3 4"
  // (the best-ranked merge) never applies across the cut.
  EXPECT_EQ(tok->encode("12345"), (Ids{259, 256, '3', 258}));
  EXPECT_EQ(tok->encode("12345", false), (Ids{256, '3', 258}));
  EXPECT_EQ(tok->encode("x<|end_of_text|>", false), (Ids{'x', 260}));
  EXPECT_EQ(tok->bosId(), 259);
  EXPECT_EQ(tok->eosId(), 260);
  const std::string text = "Héllo, 12345 wörld!\n";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_EQ(tok->decode(tok->encode(text), false), "<|begin_of_text|>" + text);
}

}  // namespace
}  // namespace kvscope
