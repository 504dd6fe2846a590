// Batched captures (format version 2, docs/capture-format-v2.md, and a
// tensor-parallel rank's version 3, docs/capture-format-v3.md): a
// small two-sequence capture built here parses into the manifest's batch
// fields, version 1 fields keep sequence 0's values, and every hostile value
// of a new field is refused with an Error naming it, within the hostile-input
// budgets.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/capture/capture_file.h"
#include "core/capture/capture_shard.h"
#include "core/model/safetensors.h"
#include "tests/core/base/capture_builder.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;
const std::string kSpeculativeV1 = std::string(KVSCOPE_FIXTURES) + "/captures/verify-mask-leak-dynamic-topk.kvcapture";

using capture_builder::floats;
using capture_builder::mask;
using Tensor = capture_builder::CaptureTensor;

// Two sequences, one target layer. Sequence 0 is the prompt [5, 6] left-padded
// by one slot; sequence 1 is [7, 8, 9]. Call 0 prefills both, call 1 feeds one
// token per sequence. Row ids: sequence 0 holds 0, 1, 5; sequence 1 holds 2, 3, 4, 6.
class BatchCaptureTest : public hostile::TempDirTest {
 protected:
  void SetUp() override {
    hostile::TempDirTest::SetUp();
    reset();
  }

  // The unbroken capture, again (each test breaks it one way at a time).
  void reset() {
    const Json after0 = Json::parse(R"([[[[-2, 1], [0, 2]], [[2, 3]]]])");
    const Json after1 = Json::parse(R"([[[[-2, 1], [0, 2], [5, 1]], [[2, 3], [6, 1]]]])");
    auto state = [](const Json& layers) { return Json{{"cache", "DynamicCache"}, {"kinds", {"append"}}, {"layers", layers}}; };
    manifest_ = {
        {"format", "kvscope-capture"},
        {"version", 2},
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
           {"after", state(after0)},
           {"logits", {{"rows", 3}, {"tensors", {{"logits", "target.call0.logits"}}}}}},
          {{"role", "target"},
           {"index", 1},
           {"input_ids", Json::parse("[[3], [4]]")},
           {"positions", Json::parse("[[2], [3]]")},
           {"positions_source", "position_ids"},
           {"cache_position", nullptr},
           {"attention_mask", {{"kind", "padding"}, {"tensor", "target.call1.attention_mask"}}},
           {"before", state(after0)},
           {"between", {{"kind", "none"}, {"layers", Json::array()}, {"what", "unchanged"}}},
           {"after", state(after1)},
           {"logits", {{"rows", 1}, {"tensors", {{"logits", "target.call1.logits"}}}}}}}},
        {"committed", Json::parse("[[5, 6, 3, 11], [7, 8, 9, 4, 12]]")}};
    metadata_ = {{"format", "kvscope-capture"}, {"version", "2"}};
    tensors_ = {floats("target.layer0.keys", {1, 7, 2}),
                floats("target.layer0.values", {1, 7, 2}),
                mask("target.call0.attention_mask", {{0, 1, 1}, {1, 1, 1}}),
                floats("target.call0.logits", {2, 3, 16}),
                mask("target.call1.attention_mask", {{0, 1, 1, 1}, {1, 1, 1, 1}}),
                floats("target.call1.logits", {2, 1, 16})};
  }

  std::string save() {
    const std::string path = (dir_ / "batch.kvcapture").string();
    capture_builder::writeCapture(path, manifest_, metadata_, tensors_);
    return path;
  }
  void expectRefused(const std::vector<std::string>& parts) {
    const std::string path = save();
    hostile::expectRefused([&] { CaptureFile::open(path); }, parts);
  }
  Json& call(size_t position) { return manifest_["calls"][position]; }
  Tensor& tensor(const std::string& name) {
    for (auto& t : tensors_)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
  }

  Json manifest_;
  std::map<std::string, std::string> metadata_;
  std::vector<Tensor> tensors_;
};

TEST_F(BatchCaptureTest, ParsesEverySequence) {
  const auto capture = CaptureFile::open(save());
  const CaptureManifest& m = capture->manifest();
  EXPECT_EQ(m.version, 2);
  EXPECT_EQ(m.batch, 2);
  EXPECT_TRUE(m.has_padding_slots);
  ASSERT_EQ(m.calls.size(), 2u);
  const CaptureCall& prefill = m.calls[0];
  EXPECT_EQ(prefill.batch_input_ids, (std::vector<std::vector<int64_t>>{{0, 5, 6}, {7, 8, 9}}));
  EXPECT_EQ(prefill.batch_positions, (std::vector<std::vector<int64_t>>{{1, 0, 1}, {0, 1, 2}}));
  EXPECT_EQ(prefill.input_ids, (std::vector<int64_t>{0, 5, 6}));  // version 1 fields: sequence 0's
  EXPECT_EQ(prefill.positions, (std::vector<int64_t>{1, 0, 1}));
  const CaptureLayerState& after = m.calls[1].after->layers[0];
  ASSERT_EQ(after.sequence_runs.size(), 2u);
  EXPECT_EQ(after.slot_count, 4);
  EXPECT_EQ(after.slotRows(), (std::vector<int64_t>{-2, 0, 1, 5}));
  EXPECT_EQ(after.sequenceSlotRows(0), after.slotRows());
  EXPECT_EQ(after.sequenceSlotRows(1), (std::vector<int64_t>{2, 3, 4, 6}));
  ASSERT_TRUE(m.batch_committed.has_value());
  EXPECT_EQ(m.batch_committed->at(1), (std::vector<int64_t>{7, 8, 9, 4, 12}));
  EXPECT_EQ(*m.committed, (std::vector<int64_t>{5, 6, 3, 11}));
  EXPECT_EQ(capture->tensor(m.calls[1].logits->logits).shape(), (std::vector<int64_t>{2, 1, 16}));
}

TEST_F(BatchCaptureTest, Version1FilesFillTheBatchFieldsWithTheirOneSequence) {
  const auto capture = CaptureFile::open(kSpeculativeV1);
  const CaptureManifest& m = capture->manifest();
  EXPECT_EQ(m.version, 1);
  EXPECT_EQ(m.batch, 1);
  EXPECT_FALSE(m.has_padding_slots);
  for (const auto& call : m.calls) {
    ASSERT_EQ(call.batch_input_ids.size(), 1u);
    EXPECT_EQ(call.batch_input_ids[0], call.input_ids);
    EXPECT_EQ(call.batch_positions[0], call.positions);
    if (call.after)
      for (const auto& layer : call.after->layers) EXPECT_EQ(layer.sequenceSlotRows(0), layer.slotRows());
  }
  ASSERT_TRUE(m.batch_committed.has_value());
  EXPECT_EQ(m.batch_committed->size(), 1u);
  EXPECT_EQ(m.batch_committed->front(), *m.committed);
}

TEST_F(BatchCaptureTest, VersionsMustAgree) {
  metadata_["version"] = "4";
  expectRefused({"unsupported capture version '4'", "reads 1, 2 and 3"});
  reset();
  manifest_["version"] = 1;
  expectRefused({"manifest version 1 but __metadata__.version '2'"});
  reset();
  manifest_["version"] = 7;
  expectRefused({"unsupported manifest version 7"});
}

TEST_F(BatchCaptureTest, HostileBatchSizes) {
  for (const Json& bad : {Json(0), Json(-1), Json(int64_t{1} << 40), Json(1025), Json("2"), Json(2.5)}) {
    reset();
    manifest_["batch"] = bad;
    expectRefused({"batch must be an integer in [1, 1024]"});
  }
  reset();
  manifest_.erase("batch");
  expectRefused({"the manifest has no field 'batch'"});
  reset();
  manifest_["batch"] = 3;  // every per-sequence list has 2 entries
  expectRefused({"committed must be null or a list of 3 lists"});
}

TEST_F(BatchCaptureTest, PerSequenceInputsAndPositions) {
  call(0)["input_ids"].push_back(Json::parse("[1, 2, 3]"));
  expectRefused({"call 0 (target index 0): input_ids must be a list of 2 lists (one per sequence of the batch)"});
  reset();
  call(0)["input_ids"] = Json::parse("[[0, 5, 6], [7, 8]]");
  expectRefused({"call 0 (target index 0): input_ids[1] has 2 entries where the call has 3 inputs per sequence"});
  reset();
  call(0)["input_ids"] = Json::parse("[[], []]");
  expectRefused({"call 0 (target index 0): input_ids[0] is empty"});
  reset();
  call(0)["input_ids"][1][0] = 16;
  expectRefused({"call 0 (target index 0): input_ids[1][0] must be an integer in [0, 15], got 16"});
  reset();
  call(0)["positions"][1][2] = -1;
  expectRefused({"call 0 (target index 0): positions[1][2] must be an integer in [0, 2147483647], got -1"});
  reset();
  call(0)["positions"][0][0] = int64_t{1} << 40;
  expectRefused({"call 0 (target index 0): positions[0][0] must be an integer in [0, 2147483647]"});
  reset();
  call(0)["positions"][1].push_back(3);
  expectRefused({"call 0 (target index 0): positions[1] has 4 entries, the limit is 3"});
  reset();
  call(1)["positions"] = Json::parse("[[2]]");
  expectRefused({"call 1 (target index 1): positions must be a list of 2 lists"});
  reset();
  call(1)["positions_source"] = "cache_position";
  call(1)["cache_position"] = Json::parse("[2]");
  expectRefused({"call 1 (target index 1): positions_source is cache_position but positions differ"});
}

TEST_F(BatchCaptureTest, TooManyInputsAcrossTheBatchAllocateNothing) {
  Json wide = Json::array();
  for (int i = 0; i < 600000; ++i) wide.push_back(1);
  call(0)["input_ids"] = Json::array({wide, wide});
  expectRefused({"call 0 (target index 0): input_ids[0] has 600000 entries, the limit is 524288"});
}

TEST_F(BatchCaptureTest, CommittedSequences) {
  manifest_["committed"] = Json::parse("[[5, 6, 3, 11]]");
  expectRefused({"committed must be null or a list of 2 lists (one per sequence of the batch)"});
  reset();
  manifest_["committed"] = Json::parse("[5, 6, 3, 11]");
  expectRefused({"committed must be null or a list of 2 lists"});
  reset();
  manifest_["committed"][1][0] = 99;
  expectRefused({"committed[1][0] = 99 is outside the target's vocab_size 16"});
  reset();
  manifest_["committed"][0][1] = -4;
  expectRefused({"committed[0][1] must be an integer"});
  reset();
  manifest_["committed"] = nullptr;
  const auto capture = CaptureFile::open(save());
  EXPECT_FALSE(capture->manifest().committed.has_value());
  EXPECT_FALSE(capture->manifest().batch_committed.has_value());
}

TEST_F(BatchCaptureTest, PerSequenceStates) {
  call(1)["after"]["layers"][0].erase(1);
  expectRefused({"call 1 (target index 1): after.layers[0] must be a list of 2 run lists (one per sequence"});
  reset();
  call(1)["after"]["layers"][0][1] = Json::parse("[[2, 3]]");
  expectRefused({"call 1 (target index 1): after.layers[0][1] has 3 slots where sequence 0 has 4"});
  reset();
  call(1)["after"]["layers"][0][1] = Json::parse("[[2, 3], [0, 1]]");  // row 0 is sequence 0's
  expectRefused({"call 1 (target index 1): after.layers[0] holds row id 0 twice", "across its sequences"});
  reset();
  call(1)["after"]["layers"][0][1] = Json::parse("[[-3, 1], [2, 3]]");
  expectRefused({"call 1 (target index 1): after.layers[0][1] run 0 first must be an integer in [-2, "});
  reset();
  call(1)["after"]["layers"][0][1] = Json::parse("[[-1, 1], [2, 3]]");
  expectRefused({"after.layers[0][1] run 0 holds 1 empty slots in an append layer"});
  reset();
  call(1)["after"]["layers"][0][1] = Json::parse("[[2, 3], [60, 1]]");
  expectRefused({"call 1 (target index 1): after.layers[0][1] holds row id 60 but target.layer0.keys has 7 rows"});
}

TEST_F(BatchCaptureTest, HugeSlotsAcrossTheBatchAllocateNothing) {
  call(0)["before"] = {{"cache", "StaticCache"},
                       {"kinds", {"static"}},
                       {"layers", Json::parse("[[[[-1, 16777216]], [[-1, 16777216]]]]")}};
  expectRefused({"call 0 (target index 0): before.layers[0] has 16777216 slots for each of 2 sequences",
                 "more than 16777216 in all"});
}

TEST_F(BatchCaptureTest, MasksAndLogitsHaveTheBatchAxis) {
  tensor("target.call0.attention_mask") = mask("target.call0.attention_mask", {{0, 1, 1}});
  expectRefused({"call 0 (target index 0): attention_mask (padding)", "shape [1, 3], expected [2, 3]"});
  reset();
  call(0)["attention_mask"]["kind"] = "explicit";
  expectRefused({"attention_mask (explicit)", "shape [2, 3], expected [2, 3, 3]"});
  reset();
  tensor("target.call0.logits") = floats("target.call0.logits", {3, 16});
  expectRefused({"call 0 (target index 0): logits", "shape [3, 16], expected [2, 3, V]"});
  reset();
  tensor("target.call1.logits") = floats("target.call1.logits", {2, 1, 17});
  expectRefused({"call 1 (target index 1): logits: width 17 but earlier target calls have 16"});
}

TEST_F(BatchCaptureTest, PaddingRunsAreRefusedInVersion1) {
  const auto file = SafetensorsFile::open(kSpeculativeV1);
  std::map<std::string, std::string> metadata = file->metadata();
  Json manifest = Json::parse(metadata.at("kvscope_capture"));
  manifest["calls"][0]["after"]["layers"][0] = Json::parse("[[-2, 1], [0, 9]]");
  metadata["kvscope_capture"] = manifest.dump();
  std::vector<StWriteTensor> out;
  for (const auto& info : file->tensors())
    out.push_back({info.name, info.dtype, info.shape, file->data(info), static_cast<size_t>(info.end - info.begin)});
  const std::string path = (dir_ / "v1-padding.kvcapture").string();
  writeSafetensors(path, out, metadata);
  hostile::expectRefused([&] { CaptureFile::open(path); },
                         {"call 0 (target index 0): after.layers[0] run 0 first must be an integer in [-1, "});
}

// What sequence b's view holds: its floats of the file's tensor `name` [B, R, V], rows [first, first + rows).
std::vector<float> sliceOf(const CaptureFile& file, const std::string& name, int64_t b, int64_t first, int64_t rows) {
  const CaptureTensor whole = file.tensor(name);
  const int64_t r = whole.shape()[1], v = whole.shape()[2];
  std::vector<float> out(static_cast<size_t>(rows * v));
  std::memcpy(out.data(), whole.data + 4 * (b * r + first) * v, out.size() * 4);
  return out;
}

std::vector<float> floatsOf(const CaptureTensor& t) {
  std::vector<float> out(t.nbytes() / 4);
  std::memcpy(out.data(), t.data, t.nbytes());
  return out;
}

TEST_F(BatchCaptureTest, ASequenceViewIsThatSequenceAloneWithoutPads) {
  const auto file = CaptureFile::open(save());
  const auto first = file->sequence(0);
  const CaptureManifest& m = first->manifest();
  EXPECT_EQ(first->sequenceIndex(), 0);
  EXPECT_EQ(m.version, 1);
  EXPECT_EQ(m.batch, 1);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].input_ids, (std::vector<int64_t>{5, 6}));  // the pad in front is gone
  EXPECT_EQ(m.calls[0].positions, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(m.calls[0].attention_mask.has_value());           // its work is the padding slots'
  EXPECT_EQ(m.calls[1].before->layers[0].slotRows(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(m.calls[1].after->layers[0].slotRows(), (std::vector<int64_t>{0, 1, 5}));
  EXPECT_EQ(*m.committed, (std::vector<int64_t>{5, 6, 3, 11}));
  // The prefill's logits of its two real inputs: rows 1 and 2 of sequence 0's.
  EXPECT_EQ(m.calls[0].logits->rows, 2);
  const CaptureTensor logits = first->tensor(m.calls[0].logits->logits);
  EXPECT_EQ(logits.shape(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(floatsOf(logits), sliceOf(*file, "target.call0.logits", 0, 1, 2));

  const auto second = file->sequence(1);
  const CaptureManifest& n = second->manifest();
  EXPECT_EQ(n.calls[0].input_ids, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(n.calls[1].after->layers[0].slotRows(), (std::vector<int64_t>{2, 3, 4, 6}));
  EXPECT_EQ(*n.committed, (std::vector<int64_t>{7, 8, 9, 4, 12}));
  EXPECT_EQ(floatsOf(second->tensor(n.calls[1].logits->logits)), sliceOf(*file, "target.call1.logits", 1, 0, 1));
  EXPECT_EQ(second->rowCount(CaptureRole::Target, 0), 7);  // rows are the file's
}

TEST_F(BatchCaptureTest, AVersion1CaptureIsItsOwnOnlySequence) {
  const auto file = CaptureFile::open(kSpeculativeV1);
  EXPECT_EQ(file->sequences(), 1);
  const auto view = file->sequence(0);
  EXPECT_EQ(view->manifest().calls.size(), file->manifest().calls.size());
  EXPECT_EQ(view->manifest().calls.back().input_ids, file->manifest().calls.back().input_ids);
  hostile::expectRefused([&] { file->sequence(1); }, {"no sequence 1: the capture holds 1"});
}

TEST_F(BatchCaptureTest, WhatAViewCannotHoldIsRefusedNamingTheCall) {
  const auto file = CaptureFile::open(save());
  hostile::expectRefused([&] { file->sequence(2); }, {"no sequence 2: the capture holds 2"});
  hostile::expectRefused([&] { file->sequence(-1); }, {"no sequence -1"});
  // Sequence 1's prefill with a pad between its inputs.
  call(0)["after"]["layers"][0][1] = Json::parse("[[2, 1], [-2, 1], [4, 1]]");
  call(1)["before"]["layers"][0][1] = Json::parse("[[2, 1], [-2, 1], [4, 1]]");
  call(1)["after"]["layers"][0][1] = Json::parse("[[2, 1], [-2, 1], [4, 1], [6, 1]]");
  const auto gapped = CaptureFile::open(save());
  EXPECT_NO_THROW(gapped->sequence(0));
  hostile::expectRefused([&] { gapped->sequence(1); },
                         {"target call 0: sequence 1 has pads between its inputs", "before or after"});
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// Version 3: the same batch as a rank's part of a tensor-parallel run of a
// model with 2 KV heads, its rows holding one of them.
class ShardCaptureTest : public BatchCaptureTest {
 protected:
  void SetUp() override {
    BatchCaptureTest::SetUp();
    makeShard();
  }
  void makeShard() {
    manifest_["version"] = 3;
    metadata_["version"] = "3";
    manifest_["models"]["target"]["config"]["num_key_value_heads"] = 2;
    manifest_["shard"] = {{"rank", 1}, {"ranks", 2}, {"kv_heads", {{"target", {1, 1}}}}};
  }
  void again() {
    reset();
    makeShard();
  }
};

TEST_F(ShardCaptureTest, ParsesTheRanksHeads) {
  const auto capture = CaptureFile::open(save());
  const CaptureManifest& m = capture->manifest();
  EXPECT_EQ(m.version, 3);
  EXPECT_EQ(m.batch, 2);  // version 2's layout
  ASSERT_TRUE(m.shard.has_value());
  EXPECT_EQ(m.shard->rank, 1);
  EXPECT_EQ(m.shard->ranks, 2);
  EXPECT_EQ(m.shard->kv_head_first[0], 1);
  EXPECT_EQ(m.shard->kv_head_count[0], 1);
  EXPECT_EQ(describeShard(m), "rank 1 of 2 (target KV heads 1-1 of 2)");
  EXPECT_EQ(capture->sequence(1)->manifest().shard->rank, 1);  // a sequence's view is still the rank's
}

TEST_F(ShardCaptureTest, HostileShards) {
  manifest_["version"] = 2;
  metadata_["version"] = "2";
  expectRefused({"shard is a version 3 field"});
  for (const Json& bad : {Json(2), Json(-1), Json("1"), Json(int64_t{1} << 40)}) {
    again();
    manifest_["shard"]["rank"] = bad;
    expectRefused({"shard.rank must be an integer in [0, 1]"});
  }
  for (const Json& bad : {Json(0), Json(1025), Json(1.5)}) {
    again();
    manifest_["shard"]["ranks"] = bad;
    expectRefused({"shard.ranks must be an integer in [1, 1024]"});
  }
  again();
  manifest_["shard"]["kv_heads"] = {{"target", {1, 2}}};
  expectRefused({"shard.kv_heads.target count must be an integer in [1, 1]"});
  again();
  manifest_["shard"]["kv_heads"] = {{"target", {2, 1}}};
  expectRefused({"shard.kv_heads.target first must be an integer in [0, 1]"});
  again();
  manifest_["shard"]["kv_heads"] = {{"target", {1, 1}}, {"drafter", {0, 1}}};
  expectRefused({"shard.kv_heads names 'drafter', which is no role"});
  again();
  manifest_["shard"]["kv_heads"] = Json::object();
  expectRefused({"shard.kv_heads has no entry for the target"});
  again();
  manifest_["shard"]["kv_heads"] = {{"target", Json::array({1})}};
  expectRefused({"shard.kv_heads.target must be a pair [first, count]"});
  again();
  manifest_["shard"].erase("kv_heads");
  expectRefused({"shard has no field 'kv_heads'"});
}

// A rank's rows read as the whole model's were compared with the reference
// broadcast over the heads: a false breach on a correct run. Refused instead.
TEST_F(ShardCaptureTest, RowsMustHoldTheHeadsTheManifestSays) {
  manifest_["shard"]["kv_heads"] = {{"target", {0, 2}}};
  expectRefused({"target layer 0's rows hold 1 KV head but shard.kv_heads gives this rank 2"});
  again();
  manifest_["version"] = 2;
  metadata_["version"] = "2";
  manifest_.erase("shard");
  expectRefused({"target layer 0's rows hold 1 KV head but models.target.config.num_key_value_heads is 2",
                 "check the ranks' files together"});
}

}  // namespace
}  // namespace kvscope
