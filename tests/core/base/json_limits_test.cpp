// The shared JSON limits (core/model/json_limits.h) and typed field reads
// (json_fields.h): each limit refuses with the file, the path and the limit.
#include "core/model/json_limits.h"

#include <gtest/gtest.h>

#include <chrono>

#include "core/model/json_fields.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

using hostile::expectRefused;
using hostile::nestedArrays;
using nlohmann::json;

const JsonLimits kSmall{"test file", 1000, 4, 20, true, false};

TEST(JsonLimitsTest, DeepArrayRefusedBeforeBuilding) {
  const std::string text = "{\"a\":" + nestedArrays(100000) + ",\"b\":1}";
  expectRefused([&] { parseJsonWithLimits(text, "deep.json", kTokenizerJsonLimits); },
                {"deep.json", "nested deeper than 64 levels", "/a/0/0/0/...", "tokenizer.json"});
}

TEST(JsonLimitsTest, DepthLimitIsExact) {
  EXPECT_NO_THROW(parseJsonWithLimits(nestedArrays(4), "ok.json", kSmall));
  expectRefused([&] { parseJsonWithLimits(nestedArrays(5), "five.json", kSmall); },
                {"five.json", "deeper than 4 levels"});
  expectRefused([&] { parseJsonWithLimits(R"({"a":{"b":{"c":{"d":{}}}}})", "obj.json", kSmall); },
                {"obj.json", "deeper than 4 levels", "/a/b/c/d"});
}

TEST(JsonLimitsTest, SizeLimitCheckedFirst) {
  const std::string text = "[" + std::string(2000, ' ') + "]";
  expectRefused([&] { parseJsonWithLimits(text, "big.json", kSmall); },
                {"big.json", "2002 bytes exceeds the limit of 1000 bytes"});
}

TEST(JsonLimitsTest, ValueCountLimit) {
  std::string text = "[0";
  for (int i = 0; i < 30; ++i) text += ",0";
  expectRefused([&] { parseJsonWithLimits(text + "]", "many.json", kSmall); },
                {"many.json", "more than 20 JSON values", "test file"});
}

TEST(JsonLimitsTest, NumbersBeyondInt64Refused) {
  for (const char* number : {"1e300", "-1e300", "18446744073709551616", "9223372036854775808", "9.3e18"}) {
    SCOPED_TRACE(number);
    const std::string text = std::string(R"({"model":{"vocab":{"a":)") + number + "}}}";
    expectRefused([&] { parseJsonWithLimits(text, "num.json", kTokenizerJsonLimits); },
                  {"num.json", "/model/vocab/a", "outside the range of a 64-bit integer"});
  }
  EXPECT_EQ(parseJsonWithLimits("[9223372036854775807]", "ok.json", kSmall)[0].get<int64_t>(), INT64_MAX);
  EXPECT_DOUBLE_EQ(parseJsonWithLimits("[1e300]", "ok.json", kSafetensorsHeaderLimits)[0].get<double>(), 1e300);
}

TEST(JsonLimitsTest, OverflowingNumberIsMalformedJson) {
  expectRefused([&] { parseJsonWithLimits(R"({"x":1e999})", "inf.json", kConfigJsonLimits); },
                {"inf.json", "malformed JSON", "1e999"});
}

TEST(JsonLimitsTest, NulPaddingOnlyAtTheEnd) {
  EXPECT_TRUE(parseJsonWithLimits(std::string("{}\0\0 ", 5), "pad.json", kSmall).is_object());
  expectRefused([&] { parseJsonWithLimits(std::string("{}\0{\"a\":1}", 10), "nul.json", kSmall); },
                {"nul.json", "NUL byte at offset 2"});
}

TEST(JsonLimitsTest, DuplicateKeysWhenAsked) {
  JsonLimits unique = kSmall;
  unique.unique_keys = true;
  expectRefused([&] { parseJsonWithLimits(R"({"a":{"k":1,"k":2}})", "dup.json", unique); },
                {"dup.json", "duplicate key 'k' in the object at /a "});
  EXPECT_EQ(parseJsonWithLimits(R"({"k":1,"k":2})", "last.json", kSmall)["k"], 2);
}

TEST(JsonLimitsTest, SinkGetsTopLevelMembersInOrder) {
  std::vector<std::string> keys;
  const json root = parseJsonWithLimits(R"({"z":[1,2],"a":{"b":3},"m":4})", "sink.json", kSmall,
                                        [&](std::string key, json value) {
                                          keys.push_back(key);
                                          if (key == "a") EXPECT_EQ(value["b"], 3);
                                        });
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_TRUE(root.is_object());
  EXPECT_TRUE(root.empty());
}

TEST(JsonLimitsTest, MillionMembersStreamedInLinearTime) {
  std::string text = "{";
  for (int i = 0; i < 1000000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  text += "}";
  size_t count = 0;
  const double start = hostile::cpuSeconds();
  parseJsonWithLimits(text, "wide.json", kSafetensorsHeaderLimits, [&](std::string, json) { ++count; });
  const double seconds = hostile::cpuSeconds() - start;
  EXPECT_EQ(count, 1000000u);
  EXPECT_LT(seconds, 1.0 * hostile::kTimeScale);
}

TEST(JsonLimitsTest, MissingFileAndOversizedFile) {
  expectRefused([] { readJsonFileWithLimits("/nonexistent/kvscope/config.json", kConfigJsonLimits); },
                {"/nonexistent/kvscope/config.json", "cannot open file"});
}

TEST(JsonFieldsTest, IntegersRefuseFloatsBoolsAndRange) {
  const json values = json::parse(R"([2.0, true, "7", -1, 5, 18446744073709551615, 1.5])");
  expectRefused([&] { jsonInteger(values[0], "f.json", "x.id", 0, 10); }, {"f.json", "x.id", "[0, 10]", "2.0"});
  expectRefused([&] { jsonInteger(values[1], "f.json", "x.id", 0, 10); }, {"got true"});
  expectRefused([&] { jsonInteger(values[2], "f.json", "x.id", 0, 10); }, {"got \"7\""});
  expectRefused([&] { jsonInteger(values[3], "f.json", "x.id", 0, 10); }, {"got -1"});
  EXPECT_EQ(jsonInteger(values[4], "f.json", "x.id", 0, 10), 5);
  expectRefused([&] { jsonInteger(values[5], "f.json", "x.id"); }, {"18446744073709551615"});
  expectRefused([&] { jsonIntegers(values, "f.json", "ids"); }, {"ids[0]"});
}

TEST(JsonFieldsTest, SnippetIsShortAndDoesNotWalkContainers) {
  EXPECT_EQ(jsonSnippet(json(std::string(1000, 'x'))).size(), 63u);  // 60 + "..."
  json deep = json::array();
  json* cursor = &deep;
  for (int i = 0; i < 100000; ++i) {  // built in place: dump() of this would overflow the stack
    cursor->push_back(json::array());
    cursor = &cursor->back();
  }
  EXPECT_EQ(jsonSnippet(deep), "an array of 1 elements");
}

}  // namespace
}  // namespace kvscope
