// Unit tests of the tokenizer's parts, for behaviour the fixtures do not
// reach: other pre-tokenizer and decoder layouts, BPE corner cases,
// added-token flags, and UTF-8 repair.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/tokenizer/added_vocabulary.h"
#include "core/model/tokenizer/bpe_model.h"
#include "core/model/tokenizer/pre_tokenizer.h"
#include "core/model/tokenizer/token_decoder.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;
using Strings = std::vector<std::string>;
using Ids = std::vector<int64_t>;

const char* const kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

Strings preTokenizeText(const Json& config, const std::string& text, bool at_start = true) {
  const auto pre = makePreTokenizer(config, "test");
  Strings out;
  for (const PreToken& p : preTokenize(pre.get(), {{text, at_start}})) out.push_back(p.text);
  return out;
}

TEST(PreTokenizer, Llama3SplitThenByteLevel) {
  const Json config = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Regex}}}, {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(preTokenizeText(config, "Hello world 12345 it's\n\n  x"),
            (Strings{"Hello", "Ġworld", "Ġ", "123", "45", "Ġit", "'s", "ĊĊ", "Ġ", "Ġx"}));
  EXPECT_EQ(preTokenizeText(config, "IT'S"), (Strings{"IT", "'S"}));  // (?i:...)
}

TEST(PreTokenizer, ByteLevelPrefixSpaceAndGpt2Regex) {
  const Json config = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(preTokenizeText(config, "Hello  world!"), (Strings{"ĠHello", "Ġ", "Ġworld", "!"}));
  EXPECT_EQ(preTokenizeText(config, " x"), (Strings{"Ġx"}));  // already starts with a space
}

// Oniguruma (HF) counts U+000B as \s; ICU's own \s does not.
TEST(PreTokenizer, VerticalTabIsWhitespace) {
  const Json config = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(preTokenizeText(config, " \x0B" "b"), (Strings{"Ġ", "ċ", "b"}));
}

TEST(PreTokenizer, MetaspaceSchemes) {
  Json config = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"},
                 {"split", true}};
  EXPECT_EQ(preTokenizeText(config, "Hello world"), (Strings{"▁Hello", "▁world"}));
  EXPECT_EQ(preTokenizeText(config, "Hello world", false), (Strings{"Hello", "▁world"}));
  EXPECT_EQ(preTokenizeText(config, "Hey   friend!"), (Strings{"▁Hey", "▁", "▁", "▁friend!"}));
  config["prepend_scheme"] = "always";
  EXPECT_EQ(preTokenizeText(config, "Hello world", false), (Strings{"▁Hello", "▁world"}));
  config["split"] = false;
  EXPECT_EQ(preTokenizeText(config, "a  b"), (Strings{"▁a▁▁b"}));
  const Json legacy = {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}};
  EXPECT_EQ(preTokenizeText(legacy, "a b"), (Strings{"a", "▁b"}));
}

TEST(PreTokenizer, DigitsAndSplitBehaviors) {
  EXPECT_EQ(preTokenizeText({{"type", "Digits"}, {"individual_digits", true}}, "ab12c"),
            (Strings{"ab", "1", "2", "c"}));
  EXPECT_EQ(preTokenizeText({{"type", "Digits"}, {"individual_digits", false}}, "ab12c"),
            (Strings{"ab", "12", "c"}));
  auto split = [](const char* behavior, bool invert = false) {
    return Json{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior},
                {"invert", invert}};
  };
  EXPECT_EQ(preTokenizeText(split("Removed"), "a-b--c"), (Strings{"a", "b", "c"}));
  EXPECT_EQ(preTokenizeText(split("Isolated"), "a-b--c"), (Strings{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(preTokenizeText(split("MergedWithPrevious"), "a-b--c"), (Strings{"a-", "b-", "-", "c"}));
  EXPECT_EQ(preTokenizeText(split("MergedWithNext"), "a-b--c"), (Strings{"a", "-b", "-", "-c"}));
  EXPECT_EQ(preTokenizeText(split("Contiguous"), "a-b--c"), (Strings{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(preTokenizeText(split("Removed", true), "a-b--c"), (Strings{"-", "-", "-"}));
  EXPECT_EQ(preTokenizeText({{"type", "Whitespace"}}, "Hi, you!"), (Strings{"Hi", ",", "you", "!"}));
}

Ids encodeWord(const BpeModel& model, const std::string& word) {
  Ids ids;
  model.encodeWord(word, ids);
  return ids;
}

TEST(BpeModel, ByteFallbackAndFusedUnk) {
  Json config = {{"type", "BPE"},
                 {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {"<0x63>", 4}}},
                 {"merges", Json::array({Json::array({"a", "b"})})},  // the [a, b] form
                 {"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", true}};
  EXPECT_EQ(encodeWord(*BpeModel::fromJson(config, "test"), "abcdd"), (Ids{3, 4, 0}));
  config["fuse_unk"] = false;
  config["byte_fallback"] = false;
  EXPECT_EQ(encodeWord(*BpeModel::fromJson(config, "test"), "abcdd"), (Ids{3, 0, 0, 0}));
  config.erase("unk_token");  // without an unk token HF drops unknown characters
  EXPECT_EQ(encodeWord(*BpeModel::fromJson(config, "test"), "adb"), (Ids{3}));
}

TEST(BpeModel, RankOrderAndIgnoreMerges) {
  Json config = {{"type", "BPE"},
                 {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5},
                            {"aa", 6}}},
                 {"merges", {"b c", "a b", "a a"}}};
  const auto model = BpeModel::fromJson(config, "test");
  EXPECT_EQ(encodeWord(*model, "abc"), (Ids{0, 4}));  // "b c" has the lower rank
  EXPECT_EQ(encodeWord(*model, "aaa"), (Ids{6, 0}));  // leftmost pair first
  EXPECT_EQ(encodeWord(*model, "abc"), (Ids{0, 4}));  // cached answer is the same
  config["ignore_merges"] = true;
  EXPECT_EQ(encodeWord(*BpeModel::fromJson(config, "test"), "abc"), (Ids{5}));
}

Strings runTexts(const std::vector<TextRun>& runs) {
  Strings out;
  for (const TextRun& r : runs) out.push_back(r.token_id ? "#" + std::to_string(*r.token_id) : r.text);
  return out;
}

TEST(AddedVocabulary, StripAndSingleWordFlags) {
  AddedToken mask{7, "<mask>"};
  mask.lstrip = true;
  AddedToken sep{8, "<sep>"};
  sep.rstrip = true;
  AddedToken cat{9, "cat"};
  cat.single_word = true;
  AddedToken raw{10, "<raw>"};
  raw.normalized = false;
  const AddedVocabulary added({mask, sep, cat, raw});
  const TextRun text{"a  <mask>b<sep>  c cat concat cat. <raw>", std::nullopt, true};
  EXPECT_EQ(runTexts(added.split(text, true)),
            (Strings{"a", "#7", "b", "#8", "c ", "#9", " concat ", "#9", ". <raw>"}));
  EXPECT_EQ(runTexts(added.split(text, false)),
            (Strings{"a  <mask>b<sep>  c cat concat cat. ", "#10"}));
}

std::string decodeWith(const Json& config, const Strings& tokens) {
  return decodeTokens(makeTokenDecoder(config, "test").get(), tokens);
}

TEST(TokenDecoder, ByteFallbackRepairsInvalidRuns) {
  const Json chain = {{"type", "Sequence"},
                      {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  EXPECT_EQ(decodeWith(chain, {"x", "<0xE4>", "<0xB8>", "<0xAD>", "y"}), "x中y");
  EXPECT_EQ(decodeWith(chain, {"<0xE5>", "<0x88>", "z"}), "\xEF\xBF\xBD\xEF\xBF\xBDz");
}

TEST(TokenDecoder, MetaspaceDropsFirstPrefix) {
  const Json config = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}};
  EXPECT_EQ(decodeWith(config, {"▁Hello", "▁world"}), "Hello world");
  const Json never = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}};
  EXPECT_EQ(decodeWith(never, {"▁Hello", "▁world"}), " Hello world");
  EXPECT_EQ(makeTokenDecoder(config, "test")->tokenText("▁the"), " the");
}

TEST(TokenDecoder, ByteLevelLossyAndNoDecoder) {
  EXPECT_EQ(decodeWith({{"type", "ByteLevel"}}, {"Ġh", "Ã", "©"}), " hé");
  EXPECT_EQ(decodeWith({{"type", "ByteLevel"}}, {"Ġh", "Ã"}), " h\xEF\xBF\xBD");
  EXPECT_EQ(decodeTokens(nullptr, {"a", "b"}), "a b");
}

TEST(UnicodeText, LossyRepairFollowsMaximalSubparts) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8Lossy("ok"), "ok");
  EXPECT_EQ(utf8Lossy("a\xE2\x82"), "a" + fffd);                   // truncated 3-byte
  EXPECT_EQ(utf8Lossy("\xF0\x9F\x98!"), fffd + "!");               // truncated 4-byte
  EXPECT_EQ(utf8Lossy("\xC0\x80"), fffd + fffd);                   // overlong
  EXPECT_EQ(utf8Lossy("\xED\xA0\x80"), fffd + fffd + fffd);        // surrogate
  EXPECT_EQ(utf8Lossy("\xFF" "a\x80"), fffd + "a" + fffd);
  EXPECT_TRUE(isValidUtf8("日本 🙂"));
  EXPECT_FALSE(isValidUtf8("\xF4\x90\x80\x80"));                   // above U+10FFFF
}

TEST(UnicodeText, Nfc) {
  EXPECT_EQ(normalizeUnicode("e\xCC\x81", NormalForm::NFC), "é");
  EXPECT_EQ(normalizeUnicode("é", NormalForm::NFD), "e\xCC\x81");
}

}  // namespace
}  // namespace kvscope
