// Golden tests: every case of tests/fixtures/tokenizers/<name>/encodings.json
// (ids, tokens and decoded text from the Hugging Face reference) must be
// reproduced exactly by Tokenizer::fromDirectory on the same folder.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/tokenizer/tokenizer.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

const char* const kTokenizerNames[] = {"gpt2", "llama2", "gpt2-tiny", "llama-tiny", "qwen2-tiny"};

std::string tokenizerDir(const std::string& name) {
  return std::string(KVSCOPE_FIXTURES) + "/tokenizers/" + name;
}

struct EncodingCase {
  std::string tokenizer;
  nlohmann::json data;  // one entry of "cases"
  bool nfc;             // the reference round-trips to NFC(text) (Qwen2)
};

// Keeps gtest from dumping the struct's bytes in test listings.
void PrintTo(const EncodingCase& c, std::ostream* os) {
  *os << c.tokenizer << "/" << c.data.at("name").get<std::string>();
}

std::vector<EncodingCase> loadCases() {
  std::vector<EncodingCase> cases;
  for (const char* name : kTokenizerNames) {
    std::ifstream in(tokenizerDir(name) + "/encodings.json");
    if (!in) continue;  // reported by the FixturesPresent test
    const nlohmann::json file = nlohmann::json::parse(in);
    const bool nfc = file.contains("normalization");
    for (const auto& c : file.at("cases")) cases.push_back({name, c, nfc});
  }
  return cases;
}

// Loading the real vocabularies takes a moment; load each once.
const Tokenizer& tokenizerFor(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& slot = loaded[name];
  if (!slot) slot = Tokenizer::fromDirectory(tokenizerDir(name));
  return *slot;
}

std::vector<int64_t> ids(const nlohmann::json& node) { return node.get<std::vector<int64_t>>(); }

std::string caseName(const testing::TestParamInfo<EncodingCase>& info) {
  std::string name = info.param.tokenizer + "_" + info.param.data.at("name").get<std::string>();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class TokenizerFixtureTest : public testing::TestWithParam<EncodingCase> {
 protected:
  const Tokenizer& tok() const { return tokenizerFor(GetParam().tokenizer); }
  const nlohmann::json& data() const { return GetParam().data; }
  std::string text() const { return data().at("text").get<std::string>(); }
};

TEST_P(TokenizerFixtureTest, EncodeAddsSpecialTokens) {
  EXPECT_EQ(tok().encode(text()), ids(data().at("ids")));
}

TEST_P(TokenizerFixtureTest, EncodeWithoutSpecialTokens) {
  EXPECT_EQ(tok().encode(text(), false), ids(data().at("ids_no_special")));
}

TEST_P(TokenizerFixtureTest, TokenStrings) {
  const std::vector<int64_t> expected_ids = ids(data().at("ids"));
  const auto expected = data().at("tokens").get<std::vector<std::string>>();
  ASSERT_EQ(expected_ids.size(), expected.size());
  for (size_t i = 0; i < expected_ids.size(); ++i) {
    EXPECT_EQ(tok().tokenString(expected_ids[i]), expected[i]) << "id " << expected_ids[i];
    EXPECT_EQ(tok().tokenToId(expected[i]), expected_ids[i]) << "token " << expected[i];
  }
}

TEST_P(TokenizerFixtureTest, DecodeSkipsSpecialTokens) {
  EXPECT_EQ(tok().decode(ids(data().at("ids"))), data().at("decoded").get<std::string>());
}

TEST_P(TokenizerFixtureTest, DecodeKeepsSpecialTokens) {
  EXPECT_EQ(tok().decode(ids(data().at("ids")), false),
            data().at("decoded_with_special").get<std::string>());
}

// Only the cases whose reference decode gives the text back (not those
// containing special-token literals, which decode() drops).
std::vector<EncodingCase> roundTripCases() {
  std::vector<EncodingCase> cases;
  for (EncodingCase& c : loadCases()) {
    if (c.data.at("roundtrip").get<bool>()) cases.push_back(std::move(c));
  }
  return cases;
}

class TokenizerRoundTripTest : public TokenizerFixtureTest {};

TEST_P(TokenizerRoundTripTest, DecodeOfEncodeGivesText) {
  const std::string expected =
      GetParam().nfc ? normalizeUnicode(text(), NormalForm::NFC) : text();
  EXPECT_EQ(tok().decode(tok().encode(text())), expected);
  EXPECT_EQ(tok().decode(tok().encode(text(), false)), expected);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerFixtureTest, testing::ValuesIn(loadCases()),
                         caseName);
INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerRoundTripTest, testing::ValuesIn(roundTripCases()),
                         caseName);

TEST(TokenizerFixtures, AllFixturesPresent) {
  for (const char* name : kTokenizerNames) {
    std::ifstream in(tokenizerDir(name) + "/encodings.json");
    EXPECT_TRUE(in.good()) << name;
  }
  EXPECT_EQ(loadCases().size(), 5u * 43u);
}

}  // namespace
}  // namespace kvscope
