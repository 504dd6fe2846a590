// writeBatchCapture (core/check/batch_capture_writer.h): a batch written as a
// version 2 capture reads back with the capture reader, every sequence's view
// holding that sequence's committed tokens, and its rows' K/V equal to what
// the sequence's own cache holds at the end, contiguous and paged; a paged
// batch written with its pools is version 3 whose pool slots are its block
// tables', a contiguous one the same bytes with or without them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>

#include "core/capture/capture_file.h"
#include "core/capture/capture_sequence.h"
#include "core/cache/block_table.h"
#include "core/check/batch_capture_writer.h"
#include "core/error.h"
#include "core/decode/batch_session.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

SessionOptions batchOptions(bool paged) {
  SessionOptions options;
  options.gamma = 3;
  options.max_new_tokens = 12;
  options.ignore_eos = true;
  options.record_attention = false;
  options.cache_layout.paged = paged;
  options.cache_layout.block_size = 4;
  return options;
}

// Sequence b's rows of a state layer in slot order, padding left out.
std::vector<int64_t> rowsOf(const CaptureLayerState& layer, size_t b) {
  std::vector<int64_t> rows;
  for (int64_t slot : layer.sequenceSlotRows(b)) {
    if (slot >= 0) rows.push_back(slot);
  }
  return rows;
}

void expectRoundTrip(bool paged) {
  auto target = fixtureModel("llama-tiny");
  auto drafter = std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "draft");
  const std::vector<std::vector<int64_t>> prompts{{5, 9, 13, 2}, {7}, {3, 8, 11, 4, 6, 10, 12, 1, 9}};
  BatchSession batch(target, drafter, prompts, batchOptions(paged), {});
  batch.runToEnd();
  const auto path = (std::filesystem::temp_directory_path() /
                     ("kvscope_batch_capture_" + std::to_string(::getpid()) + ".kvcapture")).string();
  std::vector<const SessionRecord*> records;
  for (size_t b = 0; b < batch.size(); ++b) records.push_back(&batch.sequence(b).record());
  writeBatchCapture(path, records, {"llama-tiny", target.get()}, {"llama-tiny-draft", drafter->model()}, "test");
  const auto file = CaptureFile::open(path);
  const CaptureManifest& manifest = file->manifest();
  ASSERT_EQ(manifest.version, 2);
  ASSERT_EQ(manifest.batch, 3);
  for (size_t b = 0; b < batch.size(); ++b) {
    const Session& session = batch.sequence(b);
    const CaptureSequenceView view = captureSequenceView(manifest, static_cast<int64_t>(b), path);
    ASSERT_TRUE(view.manifest.committed);
    EXPECT_EQ(*view.manifest.committed, session.record().sequence) << "sequence " << b;
    // The target's last call for b: its kept rows are the cache's rows at the end.
    const CaptureCall* last = nullptr;
    for (const CaptureCall& call : view.manifest.calls) {
      if (call.role == CaptureRole::Target) last = &call;
    }
    ASSERT_NE(last, nullptr);
    const KvCache& cache = *session.targetCache();
    for (int64_t l = 0; l < static_cast<int64_t>(last->after->layers.size()); ++l) {
      const std::vector<int64_t> rows = rowsOf(last->after->layers.at(static_cast<size_t>(l)), 0);  // the view's one sequence
      const at::Tensor keys = cache.keys(l).to(torch::kFloat32);  // [kv_heads, length, head_dim]
      const at::Tensor values = cache.values(l).to(torch::kFloat32);
      ASSERT_GE(static_cast<int64_t>(rows.size()), keys.size(1)) << "sequence " << b << " layer " << l;
      for (int64_t i = 0; i < keys.size(1); ++i) {
        const auto k = file->rowsFloat32(CaptureRole::Target, l, CaptureKV::Keys, rows[static_cast<size_t>(i)], 1);
        const auto v = file->rowsFloat32(CaptureRole::Target, l, CaptureKV::Values, rows[static_cast<size_t>(i)], 1);
        const at::Tensor want_k = keys.select(1, i).contiguous();  // [kv_heads, head_dim]
        const at::Tensor want_v = values.select(1, i).contiguous();
        ASSERT_EQ(static_cast<int64_t>(k.size()), want_k.numel());
        EXPECT_TRUE(torch::equal(torch::from_blob(const_cast<float*>(k.data()), want_k.sizes()), want_k))
            << "sequence " << b << " layer " << l << " row " << i;
        EXPECT_TRUE(torch::equal(torch::from_blob(const_cast<float*>(v.data()), want_v.sizes()), want_v))
            << "sequence " << b << " layer " << l << " row " << i;
      }
    }
  }
  std::filesystem::remove(path);
}

std::string scratchPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kvscope_batch_capture_" + name + "_" + std::to_string(::getpid()) + ".kvcapture")).string();
}

std::string bytesOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct DecodedBatch {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<ModelDrafter> drafter;
  std::unique_ptr<BatchSession> batch;
  std::vector<const SessionRecord*> records;
};

DecodedBatch decode(bool paged) {
  DecodedBatch d;
  d.target = fixtureModel("llama-tiny");
  d.drafter = std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "draft");
  const std::vector<std::vector<int64_t>> prompts{{5, 9, 13, 2}, {7}, {3, 8, 11, 4, 6, 10, 12, 1, 9}};
  d.batch = std::make_unique<BatchSession>(d.target, d.drafter, prompts, batchOptions(paged), std::vector<int64_t>{});
  d.batch->runToEnd();
  for (size_t b = 0; b < d.batch->size(); ++b) d.records.push_back(&d.batch->sequence(b).record());
  return d;
}

// Sequence b's slots of a state layer as pool slots, padding left out.
std::vector<int64_t> heldPoolSlots(const CapturePagedState& paged, size_t layer, size_t b) {
  std::vector<int64_t> held;
  for (int64_t slot : paged.poolSlots(layer, b)) {
    if (slot >= 0) held.push_back(slot);
  }
  return held;
}

TEST(BatchCaptureWriter, APagedBatchWithItsPoolsIsVersion3WithItsBlockTables) {
  const DecodedBatch d = decode(true);
  const std::string path = scratchPath("pools");
  writeBatchCapture(path, d.records, {"llama-tiny", d.target.get()}, {"llama-tiny-draft", d.drafter->model()}, "test",
                    poolPicturesOf(*d.batch));
  const auto file = CaptureFile::open(path);  // the reader validates every paged field against the rows
  const CaptureManifest& manifest = file->manifest();
  ASSERT_EQ(manifest.version, 3);
  const int64_t block_size = batchOptions(true).cache_layout.block_size;
  std::vector<const CaptureCall*> last_target(d.batch->size(), nullptr);
  for (const CaptureCall& call : manifest.calls) {
    for (const auto* state : {&call.before, &call.after}) {
      ASSERT_TRUE(*state && (*state)->paged) << "call " << call.index;
      const CapturePagedState& paged = *(*state)->paged;
      EXPECT_EQ(paged.block_size, block_size);
      ASSERT_TRUE(paged.free);
      // A clean batch: every block a sequence holds is its own and not free.
      for (size_t l = 0; l < paged.layers.size(); ++l) {
        std::set<int64_t> taken;
        for (size_t b = 0; b < d.batch->size(); ++b) {
          std::set<int64_t> own;
          for (int64_t slot : heldPoolSlots(paged, l, b)) own.insert(slot / block_size);
          for (int64_t block : own) {
            EXPECT_TRUE(taken.insert(block).second) << "block " << block << " held twice, call " << call.index;
            EXPECT_FALSE(paged.blockFree(block)) << "block " << block << " held and free, call " << call.index;
            EXPECT_LT(block, paged.num_blocks);
          }
        }
      }
    }
    if (call.role != CaptureRole::Target) continue;
    for (size_t b = 0; b < d.batch->size(); ++b) {
      if (!heldPoolSlots(*call.after->paged, 0, b).empty()) last_target[b] = &call;
    }
  }
  // The rows each sequence keeps at the end sit where its last target call put them.
  for (size_t b = 0; b < d.batch->size(); ++b) {
    ASSERT_NE(last_target[b], nullptr);
    const KvCache& cache = *d.batch->sequence(b).targetCache();
    const std::vector<int64_t>& blocks = cache.blockTable()->blocks();
    for (size_t l = 0; l < last_target[b]->after->paged->layers.size(); ++l) {
      const auto held = heldPoolSlots(*last_target[b]->after->paged, l, b);
      const int64_t kept = cache.length(static_cast<int64_t>(l));
      ASSERT_GE(static_cast<int64_t>(held.size()), kept);
      for (int64_t row = 0; row < kept; ++row) {
        EXPECT_EQ(held[static_cast<size_t>(row)], blocks[static_cast<size_t>(row / block_size)] * block_size + row % block_size)
            << "sequence " << b << " layer " << l << " row " << row;
      }
    }
  }
  EXPECT_THROW(writeBatchCapture(path, d.records, {"llama-tiny", d.target.get()}, {"llama-tiny-draft", d.drafter->model()},
                                 "test", {poolPicturesOf(*d.batch).front()}),
               Error);
  std::filesystem::remove(path);
}

TEST(BatchCaptureWriter, AContiguousBatchIsVersion2WithOrWithoutPools) {
  const DecodedBatch d = decode(false);
  const std::string plain = scratchPath("plain"), pooled = scratchPath("pooled");
  writeBatchCapture(plain, d.records, {"llama-tiny", d.target.get()}, {"llama-tiny-draft", d.drafter->model()}, "test");
  writeBatchCapture(pooled, d.records, {"llama-tiny", d.target.get()}, {"llama-tiny-draft", d.drafter->model()}, "test",
                    poolPicturesOf(*d.batch));
  EXPECT_EQ(CaptureFile::open(pooled)->manifest().version, 2);
  EXPECT_EQ(bytesOf(plain), bytesOf(pooled));
  EXPECT_EQ(bytesOf(pooled).find("\"paged\""), std::string::npos);
  std::filesystem::remove(plain);
  std::filesystem::remove(pooled);
}

TEST(BatchCaptureWriter, ReadsBackEverySequenceContiguous) { expectRoundTrip(false); }
TEST(BatchCaptureWriter, ReadsBackEverySequencePaged) { expectRoundTrip(true); }

}  // namespace
}  // namespace kvscope
