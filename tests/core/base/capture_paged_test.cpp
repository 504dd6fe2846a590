// Paged pools (format version 3's `paged` state field, docs/capture-format-v3.md,
// "Paged pools"): a small two-sequence capture of a paged engine built here
// parses into CapturePagedState; every hostile value of the field is refused
// with an Error naming it; and the explanation of a root cause
// (core/check/paged_explanation.h) reads where the wrong row came from out
// of the blocks: another sequence's row in a block freed while still mapped,
// and a row past the sequence's length.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/capture/capture_file.h"
#include "core/check/paged_explanation.h"
#include "core/model/safetensors.h"
#include "tests/core/base/capture_builder.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;

using capture_builder::floats;
using capture_builder::mask;
using Tensor = capture_builder::CaptureTensor;

// Two sequences, one target layer, a pool of 4 blocks of 2 rows. Call 0
// prefills sequence 0's [5, 6] (left-padded by one slot) into block 0 and
// sequence 1's [7, 8, 9] into blocks 1 and 2. Between the calls a rollback
// frees block 2 while sequence 1's table still maps it; call 1 hands it to
// sequence 0, whose new row lands at block 2 offset 0, over sequence 1's
// row 2; sequence 1's new row goes to block 2 offset 1.
class PagedCaptureTest : public hostile::TempDirTest {
 protected:
  void SetUp() override {
    hostile::TempDirTest::SetUp();
    reset();
  }

  static Json state(const Json& layers, const Json& pool, const Json& free) {
    return {{"cache", "PagedCache"},
            {"kinds", {"append"}},
            {"layers", layers},
            {"paged", {{"block_size", 2}, {"num_blocks", 4}, {"layers", pool}, {"free", free}}}};
  }

  void reset() {
    const Json after0 = state(Json::parse(R"([[[[-2, 1], [0, 2]], [[2, 3]]]])"),
                              Json::parse(R"([[[[-2, 1], [0, 2]], [[2, 3]]]])"), Json::parse("[[3, 1]]"));
    const Json after1 = state(Json::parse(R"([[[[-2, 1], [0, 2], [5, 1]], [[2, 3], [6, 1]]]])"),
                              Json::parse(R"([[[[-2, 1], [0, 2], [4, 1]], [[2, 4]]]])"), Json::parse("[[3, 1]]"));
    manifest_ = {
        {"format", "kvscope-capture"},
        {"version", 3},
        {"batch", 2},
        {"engine", {{"name", "tests/core/base"}, {"recorder", "hand-built"}}},
        {"complete", true},
        {"logits", {{"mode", "full"}}},
        {"models",
         {{"target",
           {{"name_or_path", "tiny"},
            {"config", {{"vocab_size", 16}, {"num_hidden_layers", 1}}},
            {"fingerprint", nullptr},
            {"layers", 1},
            {"calls", 2}}}}},
        {"calls",
         {{{"role", "target"},
           {"index", 0},
           {"input_ids", Json::parse("[[0, 5, 6], [7, 8, 9]]")},
           {"positions", Json::parse("[[1, 0, 1], [0, 1, 2]]")},
           {"positions_source", "position_ids"},
           {"cache_position", nullptr},
           {"attention_mask", {{"kind", "padding"}, {"tensor", "target.call0.attention_mask"}}},
           {"before", nullptr},
           {"between", nullptr},
           {"after", after0},
           {"logits", {{"rows", 3}, {"tensors", {{"logits", "target.call0.logits"}}}}}},
          {{"role", "target"},
           {"index", 1},
           {"input_ids", Json::parse("[[3], [4]]")},
           {"positions", Json::parse("[[2], [3]]")},
           {"positions_source", "position_ids"},
           {"cache_position", nullptr},
           {"attention_mask", nullptr},
           {"before", after0},
           {"between", {{"kind", "none"}, {"layers", Json::array()}, {"what", "unchanged"}}},
           {"after", after1},
           {"logits", {{"rows", 1}, {"tensors", {{"logits", "target.call1.logits"}}}}}}}},
        {"committed", Json::parse("[[5, 6, 3, 11], [7, 8, 9, 4, 12]]")}};
    metadata_ = {{"format", "kvscope-capture"}, {"version", "3"}};
    tensors_ = {floats("target.layer0.keys", {1, 7, 2}), floats("target.layer0.values", {1, 7, 2}),
                mask("target.call0.attention_mask", {{0, 1, 1}, {1, 1, 1}}), floats("target.call0.logits", {2, 3, 16}),
                floats("target.call1.logits", {2, 1, 16})};
  }

  std::string save() {
    const std::string path = (dir_ / "paged.kvcapture").string();
    capture_builder::writeCapture(path, manifest_, metadata_, tensors_);
    return path;
  }
  void expectRefused(const std::vector<std::string>& parts) {
    const std::string path = save();
    hostile::expectRefused([&] { CaptureFile::open(path); }, parts);
  }
  Json& paged(size_t call) { return manifest_["calls"][call]["after"]["paged"]; }

  Json manifest_;
  std::map<std::string, std::string> metadata_;
  std::vector<Tensor> tensors_;
};

TEST_F(PagedCaptureTest, ParsesThePool) {
  const auto capture = CaptureFile::open(save());
  const CaptureCall& call = capture->manifest().calls[1];
  ASSERT_TRUE(call.after && call.after->paged);
  const CapturePagedState& pool = *call.after->paged;
  EXPECT_EQ(pool.block_size, 2);
  EXPECT_EQ(pool.num_blocks, 4);
  EXPECT_EQ(pool.poolSlots(0, 0), (std::vector<int64_t>{-2, 0, 1, 4}));
  EXPECT_EQ(pool.poolSlots(0, 1), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE(pool.blockFree(3));
  EXPECT_FALSE(pool.blockFree(2));
}

TEST_F(PagedCaptureTest, AStateWithoutPagedHasNone) {
  manifest_["calls"][1]["after"].erase("paged");
  const auto capture = CaptureFile::open(save());
  EXPECT_FALSE(capture->manifest().calls[1].after->paged.has_value());
  EXPECT_TRUE(capture->manifest().calls[1].before->paged.has_value());
}

TEST_F(PagedCaptureTest, HostilePagedFields) {
  const std::string at = "call 1 (target index 1): after.paged";
  struct Case {
    std::function<void(Json&)> change;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](Json& p) { p["block_size"] = 0; }, {at + ".block_size must be an integer in [1, 65536]"}},
      {[](Json& p) { p["block_size"] = int64_t{1} << 40; }, {at + ".block_size"}},
      {[](Json& p) { p["block_size"] = 2.5; }, {at + ".block_size"}},
      {[](Json& p) { p["num_blocks"] = -1; }, {at + ".num_blocks must be an integer in [1, 1073741824]"}},
      {[](Json& p) { p["num_blocks"] = "4"; }, {at + ".num_blocks"}},
      {[](Json& p) { p["block_size"] = 65536; p["num_blocks"] = 1 << 20; }, {"more than 1073741824 pool slots"}},
      {[](Json& p) { p.erase("layers"); }, {at + " has no field 'layers'"}},
      {[](Json& p) { p["layers"] = Json::array(); }, {at + ".layers must be a list of 1 layers"}},
      {[](Json& p) { p["layers"][0].erase(1); }, {at + ".layers[0] must be a list of 2 run lists"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[6, 4]]"); }, {at + ".layers[0][1] run 0 runs to pool slot 9, past the pool's 8 pool slots"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[8, 1], [2, 3]]"); }, {at + ".layers[0][1] run 0 first"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[-1, 4]]"); }, {at + ".layers[0][1] run 0 first"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[2, 3]]"); }, {at + ".layers[0][1] covers 3 slots where the layer has 4"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[2, 5]]"); }, {at + ".layers[0][1]"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[-2, 1], [2, 3]]"); }, {at + ".layers[0][1] slot 0 is padding"}},
      {[](Json& p) { p["layers"][0][0] = Json::parse("[[0, 4]]"); }, {at + ".layers[0][0] slot 0 names a pool slot"}},
      {[](Json& p) { p["layers"][0][1] = Json::parse("[[2, 1], [3, 1], [4, 1], [5, 1], [6, 1]]"); }, {at + ".layers[0][1] has 5 runs"}},
      {[](Json& p) { p["free"] = Json::parse("[[3, 2]]"); }, {at + ".free run 0 runs to block 4, past the pool's 4 blocks"}},
      {[](Json& p) { p["free"] = Json::parse("[[4, 1]]"); }, {at + ".free run 0 first"}},
      {[](Json& p) { p["free"] = Json::parse("[[-2, 1]]"); }, {at + ".free run 0 first"}},
      {[](Json& p) { p["free"] = Json::parse("[3]"); }, {at + ".free run 0 must be a pair"}},
      {[](Json& p) { p["free"] = "all"; }, {at + ".free must be a list of runs"}},
      {[](Json& p) { p = 7; }, {at + " must be an object"}},
  };
  for (const Case& c : cases) {
    reset();
    c.change(paged(1));
    expectRefused(c.parts);
  }
}

TEST_F(PagedCaptureTest, PagedIsAVersion3Field) {
  manifest_["version"] = 2;
  metadata_["version"] = "2";
  expectRefused({"call 0 (target index 0): after.paged is a version 3 field; this file is version 2"});
}

RootCause cause(CacheEventKind operation, int64_t sequence, int64_t row, int64_t expected, int64_t actual) {
  RootCause c;
  c.cache = CacheRole::Target;
  c.operation = operation;
  c.call = 1;
  c.sequence = sequence;
  c.layers = {0};
  c.rows = {row};
  c.expected_rows = expected;
  c.actual_rows = actual;
  return c;
}

TEST_F(PagedCaptureTest, ExplainsAnotherSequencesRowInAFreedBlock) {
  const auto capture = CaptureFile::open(save());
  const auto explained = explainPagedRows(capture->manifest(), cause(CacheEventKind::Append, 1, 2, 4, 4));
  ASSERT_TRUE(explained.has_value());
  ASSERT_EQ(explained->rows.size(), 1u);
  const PagedRowFact& fact = explained->rows.front();
  EXPECT_EQ(fact.block, 2);
  EXPECT_EQ(fact.offset, 0);
  EXPECT_EQ(fact.also_mapped_by, (std::vector<int64_t>{0}));
  EXPECT_EQ(fact.written_by, std::optional<int64_t>(0));
  EXPECT_EQ(fact.handed_to, std::optional<int64_t>(0));
  EXPECT_FALSE(fact.on_free_list);
  EXPECT_FALSE(fact.past_length);
  EXPECT_EQ(explained->sentence,
            "; in the paged pool, row 2 is in block 2 (offset 0), where sequence 0 wrote its own row in this call "
            "(another sequence's row): the block was freed while sequence 1's table still mapped it, then given to "
            "sequence 0 (a freed block)");
  nlohmann::json json = {{"row_details", {{{"layer", 0}, {"row", 2}}, {{"layer", 0}, {"row", 3}}}}};
  addPagedFacts(json, *explained);
  EXPECT_EQ(json["row_details"][0]["block"], 2);
  EXPECT_EQ(json["row_details"][0]["written_by"], 0);
  EXPECT_EQ(json["row_details"][0]["freed_and_handed_to"], 0);
  EXPECT_FALSE(json["row_details"][1].contains("block"));
}

TEST_F(PagedCaptureTest, ExplainsARowPastTheSequencesLength) {
  const auto capture = CaptureFile::open(save());
  // Between the calls sequence 0 kept 2 rows where 1 was required: row 1 is block 0, offset 1.
  const auto explained = explainPagedRows(capture->manifest(), cause(CacheEventKind::Crop, 0, 1, 1, 2));
  ASSERT_TRUE(explained.has_value());
  ASSERT_EQ(explained->rows.size(), 1u);
  const PagedRowFact& fact = explained->rows.front();
  EXPECT_EQ((std::pair{fact.block, fact.offset}), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_TRUE(fact.past_length);
  EXPECT_TRUE(fact.also_mapped_by.empty());
  EXPECT_FALSE(fact.handed_to.has_value());
  EXPECT_EQ(explained->sentence, "; in the paged pool, row 1 is in block 0 (offset 1), past the 1 rows the sequence should hold");
}

TEST_F(PagedCaptureTest, NothingToExplainWithoutBlocks) {
  manifest_["calls"][1]["after"].erase("paged");
  const auto capture = CaptureFile::open(save());
  EXPECT_FALSE(explainPagedRows(capture->manifest(), cause(CacheEventKind::Append, 1, 2, 4, 4)).has_value());
  EXPECT_TRUE(explainPagedRows(capture->manifest(), cause(CacheEventKind::Crop, 0, 1, 1, 2)).has_value());
}

}  // namespace
}  // namespace kvscope
