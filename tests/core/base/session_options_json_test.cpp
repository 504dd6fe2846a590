// The session's options declared once (core/decode/session_options.h): the
// JSON form a trace records and a lesson page reads carries every field and
// reads back to the same options; anything else is refused naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/decode/session_options.h"
#include "core/error.h"
#include "tests/core/base/session_options_samples.h"

namespace kvscope {
namespace {

using nlohmann::json;

// The message of the Error `read` throws; fails the test when none is thrown.
std::string refusal(const json& object) {
  try {
    readSessionOptions(object);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << object.dump() << " was accepted";
  return {};
}

TEST(SessionOptionsJson, CarriesEveryFieldAndReadsBackTheSameOptions) {
  const json unusual = sessionOptionsJson(unusualOptions());
  const json defaults = sessionOptionsJson(SessionOptions{});
  ASSERT_EQ(unusual.size(), 21u);
  // A field the JSON left out would show here as a key equal to its default
  // (use_cache stays on and the layouts contiguous and ragged: the eviction
  // needs them; the cache off and the paged and padded layouts are read below).
  for (const auto& [key, value] : unusual.items()) {
    if (key != "use_cache" && key != "cache_layout" && key != "batch_layout") EXPECT_NE(value, defaults.at(key)) << key;
  }
  EXPECT_EQ(sessionOptionsJson(readSessionOptions(unusual)), unusual);
  EXPECT_EQ(sessionOptionsJson(readSessionOptions(defaults)), defaults);
  SessionOptions uncached;
  uncached.use_cache = false;
  EXPECT_FALSE(readSessionOptions(sessionOptionsJson(uncached)).use_cache);
  SessionOptions paged;
  paged.cache_layout = StorageLayout{true, 5};
  EXPECT_EQ(sessionOptionsJson(paged).at("cache_layout"), "paged:5");
  const SessionOptions read = readSessionOptions(sessionOptionsJson(paged));
  EXPECT_TRUE(read.cache_layout.paged);
  EXPECT_EQ(read.cache_layout.block_size, 5);
  EXPECT_NE(refusal({{"cache_layout", "paged:0"}}).find("block size"), std::string::npos);
  EXPECT_NE(refusal({{"cache_layout", "paged"}, {"eviction", "h2o:0.5"}}).find("contiguous"), std::string::npos);
  // The padded batch layout (docs/batching.md): read back, and refused where it cannot hold.
  SessionOptions padded;
  padded.batch_layout = BatchLayout::Padded;
  EXPECT_EQ(sessionOptionsJson(padded).at("batch_layout"), "padded");
  EXPECT_EQ(readSessionOptions(sessionOptionsJson(padded)).batch_layout, BatchLayout::Padded);
  EXPECT_NE(refusal({{"batch_layout", "square"}}).find("ragged, padded"), std::string::npos);
  EXPECT_NE(refusal({{"batch_layout", "padded"}, {"cache_layout", "paged"}}).find("paged engines do not pad"),
            std::string::npos);
  EXPECT_NE(refusal({{"fault", "padding-mask-dropped"}}).find("--batch-layout padded"), std::string::npos);
}

TEST(SessionOptionsJson, FieldsNotNamedKeepTheBase) {
  const SessionOptions read = readSessionOptions({{"gamma", 2}}, unusualOptions());
  EXPECT_EQ(read.gamma, 2);
  json expected = sessionOptionsJson(unusualOptions());
  expected["gamma"] = 2;
  EXPECT_EQ(sessionOptionsJson(read), expected);
  EXPECT_EQ(readSessionOptions(json::object()).max_new_tokens, SessionOptions{}.max_new_tokens);
}

TEST(SessionOptionsJson, UnknownKeysAreNamedWithTheKnownOnes) {
  const std::string message = refusal({{"gama", 4}});
  EXPECT_NE(message.find("session option 'gama': unknown session option"), std::string::npos) << message;
  EXPECT_NE(message.find("max_new_tokens"), std::string::npos) << message;
  EXPECT_NE(refusal(json::array({1, 2})).find("must be a JSON object, got array"), std::string::npos);
}

TEST(SessionOptionsJson, WrongTypesAndRangesAreNamed) {
  EXPECT_NE(refusal({{"gamma", "4"}}).find("'gamma': must be an integer in 0..64, got \"4\""), std::string::npos);
  EXPECT_NE(refusal({{"gamma", 4.5}}).find("'gamma': must be an integer"), std::string::npos);
  EXPECT_NE(refusal({{"gamma", 65}}).find("'gamma'"), std::string::npos);
  EXPECT_NE(refusal({{"max_new_tokens", 0}}).find("'max_new_tokens'"), std::string::npos);
  EXPECT_NE(refusal({{"seed", -1}}).find("'seed'"), std::string::npos);
  EXPECT_NE(refusal({{"seed", 18446744073709551615ull}}).find("'seed'"), std::string::npos);
  EXPECT_NE(refusal({{"use_cache", 1}}).find("'use_cache': must be true or false"), std::string::npos);
  EXPECT_NE(refusal({{"temperature", "hot"}}).find("'temperature': must be a number"), std::string::npos);
  EXPECT_NE(refusal({{"bookkeeping", "lazy"}}).find("'bookkeeping'"), std::string::npos);
  EXPECT_NE(refusal({{"draft_confidence", 1.5}}).find("'draft_confidence': must be a probability in 0..1, got 1.5"),
            std::string::npos);
  EXPECT_NE(refusal({{"draft_confidence", -0.1}}).find("'draft_confidence'"), std::string::npos);
  EXPECT_NE(refusal({{"draft_confidence", "high"}}).find("'draft_confidence'"), std::string::npos);
  EXPECT_DOUBLE_EQ(readSessionOptions({{"draft_confidence", 0.4}}).draft_confidence, 0.4);
  // A long text is refused by its length, and cut in the message.
  const std::string long_name = refusal({{"fault", std::string(5000, 'x')}});
  EXPECT_NE(long_name.find("'fault': must be a string of at most 256 bytes"), std::string::npos) << long_name;
  EXPECT_LT(long_name.size(), 600u);
}

TEST(SessionOptionsJson, SamplingIsGreedySampleOrTheDescriptionOfItsNumbers) {
  EXPECT_TRUE(readSessionOptions({{"sampling", "greedy"}}).sampling.greedy);
  EXPECT_FALSE(readSessionOptions({{"sampling", "sample"}}).sampling.greedy);
  const SessionOptions described =
      readSessionOptions({{"sampling", "temperature 0.8, top-k 40"}, {"temperature", 0.8}, {"top_k", 40}});
  EXPECT_FALSE(described.sampling.greedy);
  EXPECT_DOUBLE_EQ(described.sampling.temperature, 0.8);
  // A description the numbers beside it do not give, or a word of neither kind.
  EXPECT_NE(refusal({{"sampling", "temperature 0.8, top-k 40"}}).find("'sampling'"), std::string::npos);
  EXPECT_NE(refusal({{"sampling", "nucleus"}}).find("\"greedy\" or \"sample\""), std::string::npos);
  EXPECT_NE(refusal({{"sampling", "sample"}, {"temperature", 0}}).find("temperature"), std::string::npos);
}

TEST(SessionOptionsJson, FaultAndEvictionUseTheCoreNamesAndNoneClearsTheBase) {
  const std::string fault = refusal({{"fault", "no-such-fault"}});
  EXPECT_NE(fault.find("session option 'fault'"), std::string::npos) << fault;
  EXPECT_NE(fault.find("prune-short"), std::string::npos) << fault;  // the names it knows
  EXPECT_NE(refusal({{"eviction", "lru:0.5"}}).find("session option 'eviction'"), std::string::npos);
  EXPECT_EQ(readSessionOptions({{"fault", "bonus-not-fed"}}).fault, parseFault("bonus-not-fed"));
  EXPECT_FALSE(readSessionOptions({{"eviction", "none"}}, unusualOptions()).eviction.has_value());
}

TEST(SessionOptionsJson, TheRefusalNamesItsFieldForReadersWithTheirOwnPaths) {
  try {
    readSessionOptions({{"gamma", "4"}});
    ADD_FAILURE() << "accepted";
  } catch (const SessionOptionError& e) {
    EXPECT_EQ(e.field(), "gamma");
    EXPECT_EQ(e.reason(), "must be an integer in 0..64, got \"4\"");
  }
  try {
    readSessionOptions({{"adaptive_gamma", true}, {"gamma", 20}});
    ADD_FAILURE() << "accepted";
  } catch (const SessionOptionError& e) {
    EXPECT_EQ(e.field(), "");  // a combination: no one field
  }
}

TEST(SessionOptionsJson, TheResultIsValidatedAsAWhole) {
  EXPECT_NE(refusal({{"adaptive_gamma", true}, {"gamma", 20}}).find("adaptive bounds"), std::string::npos);
  EXPECT_NE(refusal({{"eviction", "h2o:0.5"}, {"use_cache", false}}).find("--evict needs the KV cache on"),
            std::string::npos);
}

}  // namespace
}  // namespace kvscope
