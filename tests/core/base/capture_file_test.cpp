// The .kvcapture reader (core/capture): the fixture captures written by the
// Python recorder parse into the manifest the recorder wrote, and hostile
// edits of them are refused with an Error naming the call, role, layer or
// tensor at fault, within the hostile-input budgets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/capture/capture_file.h"
#include "core/model/safetensors.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;
const std::string kCaptures = std::string(KVSCOPE_FIXTURES) + "/captures/";
const std::string kSpeculative = kCaptures + "verify-mask-leak-dynamic-topk.kvcapture";
const std::string kStatic = kCaptures + "greedy-static-full.kvcapture";
const std::string kRing = kCaptures + "greedy-ring-topk.kvcapture";

std::vector<int64_t> range(int64_t first, int64_t count) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(first + i);
  return out;
}

TEST(CaptureFileTest, SpeculativeCaptureWithMasks) {
  const auto capture = CaptureFile::open(kSpeculative);
  const CaptureManifest& m = capture->manifest();
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.logits_mode, CaptureLogitsMode::TopK);
  EXPECT_EQ(m.top_k, 4);
  ASSERT_NE(m.model(CaptureRole::Drafter), nullptr);
  EXPECT_EQ(m.model(CaptureRole::Target)->layers, 2);
  EXPECT_EQ(m.model(CaptureRole::Drafter)->layers, 1);
  EXPECT_EQ(m.model(CaptureRole::Target)->config.vocab_size, 512);
  EXPECT_EQ(m.model(CaptureRole::Target)->fingerprint->shape, (std::vector<int64_t>{512, 64}));
  ASSERT_EQ(m.calls.size(), 17u);
  ASSERT_TRUE(m.committed.has_value());
  EXPECT_EQ(m.committed->size(), 17u);

  const CaptureCall& prefill = m.calls[0];
  EXPECT_EQ(prefill.role, CaptureRole::Target);
  EXPECT_EQ(prefill.positions, range(0, 10));
  EXPECT_EQ(prefill.positions_source, CapturePositionsSource::PastLength);
  EXPECT_FALSE(prefill.between.has_value());
  EXPECT_TRUE(prefill.before->layers[0].slotRows().empty());
  EXPECT_EQ(prefill.after->layers[1].slotRows(), range(0, 10));
  EXPECT_EQ(prefill.after->layers[1].kind, CaptureLayerKind::Append);

  int masks = 0;
  for (const auto& call : m.calls) {
    if (!call.attention_mask) continue;
    ++masks;
    const CaptureTensor mask = capture->tensor(call.attention_mask->tensor);
    EXPECT_EQ(mask.dtype(), StDType::BOOL);
    EXPECT_EQ(mask.shape()[0], static_cast<int64_t>(call.input_ids.size()));
    EXPECT_EQ(mask.shape()[1], call.after->layers[0].slot_count);
  }
  EXPECT_EQ(masks, 6);  // every target verify
  // A prune keeps rows 0-10 and the accepted drafts: the slots skip rows.
  const CaptureCall* last_target = nullptr;
  for (const auto& call : m.calls)
    if (call.role == CaptureRole::Target) last_target = &call;
  EXPECT_EQ(last_target->index, 6);
  EXPECT_EQ(last_target->between->kind, CaptureBetweenKind::Crop);
}

TEST(CaptureFileTest, RowsAsFloat32MatchTheStoredBytes) {
  const auto capture = CaptureFile::open(kSpeculative);
  const CaptureTensor keys = capture->rows(CaptureRole::Drafter, 0, CaptureKV::Keys);
  ASSERT_EQ(keys.dtype(), StDType::F32);
  const int64_t heads = keys.shape()[0], rows = keys.shape()[1], dim = keys.shape()[2];
  EXPECT_EQ(rows, capture->rowCount(CaptureRole::Drafter, 0));
  const std::vector<float> some = capture->rowsFloat32(CaptureRole::Drafter, 0, CaptureKV::Keys, 3, 2);
  ASSERT_EQ(static_cast<int64_t>(some.size()), heads * 2 * dim);
  for (int64_t head = 0; head < heads; ++head)
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t d = 0; d < dim; ++d) {
        float stored = 0;
        std::memcpy(&stored, keys.data + 4 * ((head * rows + 3 + row) * dim + d), 4);
        EXPECT_EQ(some[static_cast<size_t>((head * 2 + row) * dim + d)], stored);
      }
  EXPECT_THROW(capture->rowsFloat32(CaptureRole::Drafter, 0, CaptureKV::Values, rows - 1, 2), Error);
  EXPECT_THROW(capture->rows(CaptureRole::Drafter, 1, CaptureKV::Keys), Error);
}

TEST(CaptureFileTest, StaticCacheWithEmptySlotsAndFullLogits) {
  const auto capture = CaptureFile::open(kStatic);
  const CaptureManifest& m = capture->manifest();
  EXPECT_EQ(m.logits_mode, CaptureLogitsMode::Full);
  EXPECT_EQ(m.model(CaptureRole::Drafter), nullptr);
  ASSERT_EQ(m.calls.size(), 3u);
  const CaptureCall& prefill = m.calls[0];
  EXPECT_EQ(prefill.positions_source, CapturePositionsSource::CachePosition);
  EXPECT_EQ(*prefill.cache_position, range(0, 11));
  EXPECT_EQ(prefill.before->layers[0].slotRows(), std::vector<int64_t>(160, -1));
  std::vector<int64_t> expected = range(0, 11);
  expected.resize(160, -1);
  EXPECT_EQ(prefill.after->layers[0].slotRows(), expected);
  EXPECT_EQ(prefill.after->layers[0].kind, CaptureLayerKind::Static);
  const CaptureTensor logits = capture->tensor(prefill.logits->logits);
  EXPECT_EQ(logits.shape(), (std::vector<int64_t>{11, 512}));
}

TEST(CaptureFileTest, RingCacheRolls) {
  const auto capture = CaptureFile::open(kRing);
  const CaptureManifest& m = capture->manifest();
  ASSERT_EQ(m.calls.size(), 10u);
  EXPECT_EQ(m.model(CaptureRole::Target)->config.sliding_window, 16);
  EXPECT_EQ(m.model(CaptureRole::Target)->config.sliding_layers, (std::vector<bool>{true, true, true}));
  const CaptureCall& last = m.calls[9];
  EXPECT_EQ(last.before->layers[2].kind, CaptureLayerKind::Ring);
  EXPECT_EQ(last.before->layers[2].slotRows(), range(1, 16));
  EXPECT_EQ(last.after->layers[2].slotRows(), range(2, 16));
}

// --- hostile edits of the fixtures ------------------------------------------

struct EditableTensor {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A fixture taken apart (manifest JSON, tensors), edited, and written back.
class HostileCaptureTest : public hostile::TempDirTest {
 protected:
  void load(const std::string& fixture) {
    const auto file = SafetensorsFile::open(fixture);
    metadata_ = file->metadata();
    manifest_ = Json::parse(metadata_.at("kvscope_capture"));
    tensors_.clear();
    for (const auto& info : file->tensors())
      tensors_.push_back({info.name, info.dtype, info.shape,
                          std::string(reinterpret_cast<const char*>(file->data(info)), info.end - info.begin)});
  }
  std::string save() {
    metadata_["kvscope_capture"] = manifest_.dump();
    std::vector<StWriteTensor> out;
    for (const auto& t : tensors_) out.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
    const std::string path = (dir_ / "edited.kvcapture").string();
    writeSafetensors(path, out, metadata_);
    return path;
  }
  void remove(const std::string& name) {
    tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(), [&](const auto& t) { return t.name == name; }),
                   tensors_.end());
  }
  EditableTensor& tensor(const std::string& name) {
    for (auto& t : tensors_)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
  }
  // Saves the edited capture and expects open() to refuse it with every part.
  void expectRefused(const std::vector<std::string>& parts) {
    const std::string path = save();
    hostile::expectRefused([&] { CaptureFile::open(path); }, parts);
  }
  Json& call(size_t position) { return manifest_["calls"][position]; }

  std::map<std::string, std::string> metadata_;
  Json manifest_;
  std::vector<EditableTensor> tensors_;
};

TEST_F(HostileCaptureTest, UnchangedRoundTripOpens) {
  load(kSpeculative);
  EXPECT_NO_THROW(CaptureFile::open(save()));
}

TEST_F(HostileCaptureTest, BadVersions) {
  load(kSpeculative);
  metadata_["version"] = "4";
  expectRefused({"unsupported capture version '4'"});
  load(kSpeculative);
  metadata_["version"] = "2";  // a version 1 manifest in a file that says 2
  expectRefused({"manifest version 1 but __metadata__.version '2'"});
  load(kSpeculative);
  manifest_["version"] = 4;
  expectRefused({"unsupported manifest version 4"});
  load(kSpeculative);
  metadata_.erase("format");
  expectRefused({"not a kvscope capture", "format"});
}

TEST_F(HostileCaptureTest, MissingRowTensor) {
  load(kSpeculative);
  remove("drafter.layer0.values");
  expectRefused({"models.drafter layer 0", "'drafter.layer0.values'", "does not hold"});
}

TEST_F(HostileCaptureTest, LayerCountDiffersFromTheModel) {
  load(kSpeculative);
  call(1)["after"]["layers"][1] = Json::parse("[[0, 10]]");  // the drafter has one layer
  expectRefused({"call 1 (drafter index 0): after.layers must be a list of 1 entries (models.drafter.layers)"});
}

TEST_F(HostileCaptureTest, RowIdOutOfRangeNamesTheTensor) {
  load(kSpeculative);
  call(0)["after"]["layers"][1] = Json::parse("[[0, 10], [900, 1]]");
  expectRefused({"call 0 (target index 0): after.layers[1] holds row id 900 but target.layer1.keys has 25 rows"});
}

TEST_F(HostileCaptureTest, DuplicateRowIdInALayer) {
  load(kSpeculative);
  call(0)["after"]["layers"][0] = Json::parse("[[0, 10], [4, 1]]");
  expectRefused({"call 0 (target index 0): after.layers[0] holds row id 4 twice"});
}

TEST_F(HostileCaptureTest, HugeSlotCountsAllocateNothing) {
  load(kStatic);
  call(0)["before"]["layers"][0] = Json::parse("[[-1, 16777216], [-1, 16777216]]");
  expectRefused({"call 0 (target index 0): before.layers[0] has more than 16777216 slots"});
  load(kStatic);
  call(0)["before"]["layers"][0] = Json::parse("[[-1, 16777217]]");
  expectRefused({"before.layers[0] run 0 count must be an integer in [1, 16777216]"});
  load(kStatic);
  call(0)["before"]["layers"][0] = Json::parse("[[-1, 1e30]]");
  expectRefused({"1e+30 at /calls/0/before/layers/0/0/1 is outside the range of a 64-bit integer"});
  load(kSpeculative);
  manifest_["models"]["target"]["layers"] = 1u << 30;
  expectRefused({"models.target.layers must be an integer in [0, 1024]"});
}

TEST_F(HostileCaptureTest, EmptySlotsInAnAppendLayer) {
  load(kSpeculative);
  call(0)["after"]["layers"][0] = Json::parse("[[0, 10], [-1, 5]]");
  expectRefused({"call 0 (target index 0): after.layers[0] run 1", "empty slots in an append layer"});
}

TEST_F(HostileCaptureTest, TruncatedFile) {
  load(kSpeculative);
  const std::string path = save();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string cut = write("cut.kvcapture", bytes.substr(0, bytes.size() - 100));
  hostile::expectRefused([&] { CaptureFile::open(cut); }, {"cut.kvcapture", "truncated"});
  const std::string stub = write("stub.kvcapture", bytes.substr(0, 5));
  hostile::expectRefused([&] { CaptureFile::open(stub); }, {"truncated"});
}

TEST_F(HostileCaptureTest, UnreferencedTensor) {
  load(kSpeculative);
  tensors_.push_back({"stray", StDType::F32, {2}, std::string(8, '\0')});
  expectRefused({"tensor 'stray' is referenced by no model or call"});
}

TEST_F(HostileCaptureTest, WrongDTypes) {
  load(kSpeculative);
  tensor("target.call1.attention_mask").dtype = StDType::U8;
  expectRefused({"call 4 (target index 1): attention_mask", "dtype U8, expected BOOL"});
  load(kSpeculative);
  tensor("target.layer0.keys").dtype = StDType::I32;
  expectRefused({"'target.layer0.keys' has dtype I32, expected F32, F16 or BF16"});
  load(kSpeculative);
  tensor("target.layer0.values").dtype = StDType::I32;
  expectRefused({"'target.layer0.values' has dtype I32, expected F32"});
}

TEST_F(HostileCaptureTest, IndexGapsAndCounts) {
  load(kSpeculative);
  // calls[3] is the drafter's third call (index 2).
  ASSERT_EQ(call(3)["role"], "drafter");
  call(3)["index"] = 3;
  expectRefused({"call 3 has drafter index 3 where 2 was due"});
  load(kSpeculative);
  manifest_["models"]["target"]["calls"] = 8;
  expectRefused({"models.target.calls is 8 but calls holds 7"});
}

TEST_F(HostileCaptureTest, UnknownRoles) {
  load(kStatic);
  manifest_["models"]["encoder"] = manifest_["models"]["target"];
  expectRefused({"models key must be one of target, drafter, got \"encoder\""});
  load(kStatic);
  call(1)["role"] = "drafter";
  expectRefused({"call 1 has role 'drafter' but models has no such entry"});
}

TEST_F(HostileCaptureTest, InputsPositionsAndVocab) {
  load(kSpeculative);
  call(2)["positions"].push_back(99);
  expectRefused({"call 2 (drafter index 1): positions has"});
  load(kSpeculative);
  call(2)["positions"].erase(0);
  expectRefused({"call 2 (drafter index 1): 0 positions for 1 inputs"});
  load(kSpeculative);
  call(2)["input_ids"][0] = 512;
  expectRefused({"call 2 (drafter index 1): input_ids[0] must be an integer in [0, 511], got 512"});
  load(kStatic);
  call(0)["positions_source"] = "cache_position";
  call(0)["positions"][0] = 5;
  expectRefused({"call 0 (target index 0): positions_source is cache_position but positions differ"});
}

TEST_F(HostileCaptureTest, MaskAndLogitsShapes) {
  load(kSpeculative);
  call(7)["attention_mask"]["kind"] = "padding";
  ASSERT_EQ(call(7)["attention_mask"]["tensor"], "target.call2.attention_mask");
  expectRefused({"call 7 (target index 2): attention_mask (padding)", "shape [3, 14], expected [1, 14]"});
  load(kSpeculative);
  call(0)["logits"]["rows"] = 9;
  expectRefused({"call 0 (target index 0): logits.top_ids", "shape [10, 4], expected [9, k']"});
  load(kSpeculative);
  std::string& ids = tensor("target.call0.top_ids").bytes;
  const int32_t outside = 600;
  std::memcpy(ids.data() + 8, &outside, 4);
  expectRefused({"call 0 (target index 0): logits top id 600", "outside vocab_size 512"});
}

TEST_F(HostileCaptureTest, TensorReferencedTwice) {
  load(kSpeculative);
  call(7)["attention_mask"]["tensor"] = "target.call1.attention_mask";
  remove("target.call2.attention_mask");
  expectRefused({"call 7 (target index 2): attention_mask names tensor 'target.call1.attention_mask'",
                 "already uses"});
}

TEST_F(HostileCaptureTest, BetweenOnAFirstCall) {
  load(kSpeculative);
  call(0)["between"] = call(2)["between"];
  expectRefused({"call 0 (target index 0): between must be null for a role's first call"});
}

}  // namespace
}  // namespace kvscope
