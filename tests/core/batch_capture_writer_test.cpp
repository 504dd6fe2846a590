// writeBatchCapture (core/check/batch_capture_writer.h): a batch written as a
// version 2 capture reads back with the capture reader, every sequence's view
// holding that sequence's committed tokens, and its rows' K/V equal to what
// the sequence's own cache holds at the end, contiguous and paged.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <unistd.h>

#include "core/capture/capture_file.h"
#include "core/capture/capture_sequence.h"
#include "core/check/batch_capture_writer.h"
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

TEST(BatchCaptureWriter, ReadsBackEverySequenceContiguous) { expectRoundTrip(false); }
TEST(BatchCaptureWriter, ReadsBackEverySequencePaged) { expectRoundTrip(true); }

}  // namespace
}  // namespace kvscope
