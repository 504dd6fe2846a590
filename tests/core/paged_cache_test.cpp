// The paged cache layout (core/cache/block_pool.h, core/cache/block_table.h,
// KvCache's paged constructor): logits bit-identical to the contiguous layout,
// sequences sharing a pool kept apart, blocks freed and reused as the log
// says, the two block faults' switches, and hostile parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/block_pool.h"
#include "core/cache/block_table.h"
#include "core/cache/storage_layout.h"
#include "core/cache/kv_cache.h"
#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/causal_lm.h"

namespace kvscope {
namespace {

const std::string kPagedFixtureRoot = KVSCOPE_FIXTURES;

std::shared_ptr<BlockPool> smallPool(int64_t block_size, int64_t initial_blocks = 1, size_t log_capacity = 4096) {
  return std::make_shared<BlockPool>(BlockPoolShape{2, 2, 4, block_size}, torch::kFloat32, initial_blocks,
                                     log_capacity);
}

// Appends the same n random rows to every layer of both caches.
void appendBoth(KvCache& a, KvCache& b, int64_t n, torch::Generator& generator) {
  for (int64_t layer = 0; layer < a.numLayers(); ++layer) {
    auto k = torch::randn({a.kvHeads(), n, a.headDim()}, generator);  // [kv_heads, n, head_dim]
    auto v = torch::randn({a.kvHeads(), n, a.headDim()}, generator);
    a.append(layer, k, v);
    b.append(layer, k, v);
  }
}

// Appends `rows` ([kv_heads, n, head_dim]) as K and V to every layer.
void appendAll(KvCache& cache, const torch::Tensor& rows) {
  for (int64_t layer = 0; layer < cache.numLayers(); ++layer) cache.append(layer, rows, rows);
}

void expectSameRows(const KvCache& expected, const KvCache& actual) {
  ASSERT_EQ(expected.numLayers(), actual.numLayers());
  for (int64_t layer = 0; layer < expected.numLayers(); ++layer) {
    ASSERT_EQ(expected.length(layer), actual.length(layer));
    EXPECT_TRUE(torch::equal(expected.keys(layer), actual.keys(layer))) << "layer " << layer;
    EXPECT_TRUE(torch::equal(expected.values(layer), actual.values(layer))) << "layer " << layer;
  }
}

// ---- logits: paged equals contiguous, bit for bit --------------------------

std::shared_ptr<const CausalLM> loadModel(const std::string& dir) {
  static std::map<std::string, std::shared_ptr<const CausalLM>> loaded;
  auto& model = loaded[dir];
  if (!model) model = loadCausalLM(dir, torch::TensorOptions().dtype(torch::kFloat32));
  return model;
}

std::shared_ptr<BlockPool> poolFor(const CausalLM& model, int64_t block_size) {
  const ModelConfig& config = model.config();
  return std::make_shared<BlockPool>(BlockPoolShape{config.num_layers, config.num_kv_heads, config.head_dim, block_size},
                                     model.options());
}

// One sequence's script: prefill, decode steps, verifies, rollbacks (crops)
// and re-appends, as a speculative session drives its caches.
struct Step {
  int64_t feed = 0;        // tokens fed (at the cache's end)
  int64_t drop = 0;        // rows cropped after the forward
  bool by_position = false;  // crop with cropToPosition instead of crop
};

const std::vector<Step> kScript = {
    {12, 0}, {1, 0}, {1, 0}, {5, 3}, {1, 0}, {5, 5, true}, {5, 1}, {1, 0}, {7, 6, true}, {3, 0}, {1, 1}, {2, 0},
};

// Runs kScript on two sequences at once (A and B interleaved, B offset by one
// step), each with a contiguous cache and a paged cache; both paged caches
// share one pool. Every forward's logits must be equal bit for bit.
void expectPagedLogitsEqual(const std::string& dir, int64_t block_size) {
  SCOPED_TRACE(dir + " block " + std::to_string(block_size));
  c10::InferenceMode guard;
  const auto model = loadModel(dir);
  auto generator = torch::make_generator<torch::CPUGeneratorImpl>(42 + block_size);
  auto pool = poolFor(*model, block_size);
  struct Sequence {
    torch::Tensor ids;
    std::unique_ptr<KvCache> contiguous;
    std::unique_ptr<KvCache> paged;
  };
  std::vector<Sequence> sequences;
  for (int64_t id = 0; id < 2; ++id) {
    sequences.push_back({torch::randint(model->config().vocab_size, {64}, generator, torch::kInt64), model->makeCache(),
                         std::make_unique<KvCache>(pool, id)});
  }
  int64_t forwards = 0;
  for (size_t step = 0; step <= kScript.size(); ++step) {
    for (size_t s = 0; s < sequences.size(); ++s) {
      if (step < s || step - s >= kScript.size()) continue;
      const Step& todo = kScript[step - s];
      Sequence& seq = sequences[s];
      const int64_t start = seq.contiguous->length();
      ASSERT_EQ(seq.paged->length(), start);
      const auto tokens = seq.ids.narrow(0, start, todo.feed);
      const auto expected = model->forward(tokens, start, seq.contiguous.get());  // [feed, vocab]
      const auto actual = model->forward(tokens, start, seq.paged.get());
      ASSERT_TRUE(torch::equal(expected, actual)) << "sequence " << s << " step " << step - s;
      ++forwards;
      const int64_t kept = start + todo.feed - todo.drop;
      if (todo.by_position) {
        seq.contiguous->cropToPosition(kept);
        seq.paged->cropToPosition(kept);
      } else {
        seq.contiguous->crop(kept);
        seq.paged->crop(kept);
      }
      expectSameRows(*seq.contiguous, *seq.paged);
      const int64_t blocks = (kept + block_size - 1) / block_size;
      EXPECT_EQ(static_cast<int64_t>(seq.paged->blockTable()->blocks().size()), blocks);
    }
  }
  EXPECT_EQ(forwards, 2 * static_cast<int64_t>(kScript.size()));
}

class PagedLogits : public ::testing::TestWithParam<int64_t> {};

TEST_P(PagedLogits, BundledTargetEqualsContiguous) { expectPagedLogitsEqual(bundledModelDirectory("target"), GetParam()); }

TEST_P(PagedLogits, BundledDrafterEqualsContiguous) {
  expectPagedLogitsEqual(bundledModelDirectory("drafter"), GetParam());
}

TEST_P(PagedLogits, Gpt2FixtureEqualsContiguous) { expectPagedLogitsEqual(kPagedFixtureRoot + "/models/gpt2-tiny", GetParam()); }

TEST_P(PagedLogits, Qwen3FixtureEqualsContiguous) {
  expectPagedLogitsEqual(kPagedFixtureRoot + "/models/qwen3-tiny", GetParam());
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, PagedLogits, ::testing::Values(1, 3, 16));

// ---- storage: sequences, blocks, the log ----------------------------------

TEST(PagedCache, SequencesSharingAPoolNeverReadEachOthersRows) {
  auto pool = smallPool(3);
  auto generator = torch::make_generator<torch::CPUGeneratorImpl>(5);
  KvCache paged_a(pool, 0), paged_b(pool, 1);
  KvCache plain_a(2, 2, 4, torch::kFloat32), plain_b(2, 2, 4, torch::kFloat32);
  // Interleaved appends and rollbacks make the two tables' blocks alternate
  // in the pool and reuse each other's freed blocks.
  for (int round = 0; round < 6; ++round) {
    appendBoth(paged_a, plain_a, 1 + round % 4, generator);
    appendBoth(paged_b, plain_b, 2 + round % 3, generator);
    paged_a.crop(paged_a.length() - round % 2);
    plain_a.crop(plain_a.length() - round % 2);
    paged_b.crop(paged_b.length() / 2);
    plain_b.crop(plain_b.length() / 2);
    expectSameRows(plain_a, paged_a);
    expectSameRows(plain_b, paged_b);
  }
  for (int64_t block : paged_a.blockTable()->blocks()) EXPECT_EQ(pool->owner(block), 0);
  for (int64_t block : paged_b.blockTable()->blocks()) EXPECT_EQ(pool->owner(block), 1);
  EXPECT_EQ(pool->blocksInUse(),
            static_cast<int64_t>(paged_a.blockTable()->blocks().size() + paged_b.blockTable()->blocks().size()));
}

TEST(PagedCache, RollbackFreesWholeBlocksAndTheLogSaysSo) {
  auto pool = smallPool(4);
  KvCache a(pool, 7), b(pool, 8);
  appendAll(a, torch::ones({2, 10, 4}));
  ASSERT_EQ(a.blockTable()->blocks(), (std::vector<int64_t>{0, 1, 2}));  // rows 0-3, 4-7, 8-9
  EXPECT_EQ(a.capacity(0), 12);
  a.crop(5);  // row 4 keeps block 1 (partially kept), block 2 goes
  EXPECT_EQ(a.blockTable()->blocks(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(pool->owner(2), -1);
  appendAll(b, torch::zeros({2, 3, 4}));
  EXPECT_EQ(b.blockTable()->blocks(), (std::vector<int64_t>{2}));  // the freed block, reused
  EXPECT_EQ(pool->owner(2), 8);

  const std::vector<BlockLogEntry> expected = {
      {BlockOperation::Allocate, 0, 7, 0, false}, {BlockOperation::Allocate, 1, 7, 4, false},
      {BlockOperation::Allocate, 2, 7, 8, false}, {BlockOperation::Free, 2, 7, 8, false},
      {BlockOperation::Reuse, 2, 8, 0, false},
  };
  ASSERT_EQ(pool->log().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("log entry " + std::to_string(i));
    const BlockLogEntry& entry = pool->log()[i];
    EXPECT_EQ(blockOperationName(entry.operation), blockOperationName(expected[i].operation));
    EXPECT_EQ(entry.block, expected[i].block);
    EXPECT_EQ(entry.sequence, expected[i].sequence);
    EXPECT_EQ(entry.first_position, expected[i].first_position);
    EXPECT_EQ(entry.still_mapped, expected[i].still_mapped);
  }
  a.clear();
  EXPECT_TRUE(a.blockTable()->blocks().empty());
  EXPECT_EQ(pool->blocksInUse(), 1);  // b's
}

TEST(PagedCache, DestroyedSequenceReturnsItsBlocksAndThePoolGrows) {
  auto pool = smallPool(2, /*initial_blocks=*/1);
  auto generator = torch::make_generator<torch::CPUGeneratorImpl>(9);
  KvCache plain(2, 2, 4, torch::kFloat32);
  {
    KvCache paged(pool, 3);
    appendBoth(paged, plain, 9, generator);  // five blocks from a pool of one: grown 1 -> 2 -> 4 -> 8
    EXPECT_EQ(pool->capacity(), 8);
    expectSameRows(plain, paged);
    EXPECT_EQ(pool->blocksInUse(), 5);
  }
  EXPECT_EQ(pool->blocksInUse(), 0);
  EXPECT_EQ(pool->freeBlocks(), 8);
}

TEST(PagedCache, LogIsBounded) {
  auto pool = smallPool(1, 1, /*log_capacity=*/3);
  KvCache a(pool, 0);
  a.append(0, torch::ones({2, 5, 4}), torch::ones({2, 5, 4}));  // five allocations
  ASSERT_EQ(pool->log().size(), 3u);
  EXPECT_EQ(pool->droppedLogEntries(), 2);
  EXPECT_EQ(pool->log().front().block, 2);
  EXPECT_EQ(pool->log().back().block, 4);
}

TEST(PagedCache, CloneIsDeepAndTakesNoBlockFromTheSharedPool) {
  auto pool = smallPool(2);
  auto generator = torch::make_generator<torch::CPUGeneratorImpl>(11);
  KvCache paged(pool, 0), plain(2, 2, 4, torch::kFloat32);
  appendBoth(paged, plain, 5, generator);
  paged.blockTable()->setKeepLengthOnRollback(true);
  const int64_t in_use = pool->blocksInUse();
  KvCache copy = paged.clone();
  EXPECT_EQ(pool->blocksInUse(), in_use);
  EXPECT_NE(copy.blockTable()->pool(), pool);
  EXPECT_TRUE(copy.blockTable()->keepLengthOnRollback());
  expectSameRows(plain, copy);
  paged.blockTable()->setKeepLengthOnRollback(false);
  paged.crop(1);
  appendAll(paged, torch::zeros({2, 4, 4}));
  expectSameRows(plain, copy);  // the original's rewrite does not reach the copy
}

TEST(PagedCache, WriteOrderAndCausalSwitchesStillApply) {
  auto pool = smallPool(2);
  KvCache paged(pool, 0);
  paged.setWriteOrder(std::vector<int64_t>{2, 1, 0});
  auto k = torch::arange(24, torch::kFloat32).reshape({2, 3, 4});  // [kv_heads, 3, head_dim]
  paged.append(0, k, k);
  EXPECT_TRUE(torch::equal(paged.keys(0), k.flip(1)));
  paged.setCausalAmongNewRows(false);
  EXPECT_FALSE(paged.causalAmongNewRows());
}

TEST(PagedCache, UnsupportedFeaturesThrowNamingTheLayout) {
  auto pool = smallPool(2);
  KvCache paged(pool, 0);
  appendAll(paged, torch::ones({2, 4, 4}));
  auto expectRefused = [](const std::function<void()>& call, const std::string& feature) {
    try {
      call();
      ADD_FAILURE() << feature << " did not throw";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(feature), std::string::npos) << message;
      EXPECT_NE(message.find("paged"), std::string::npos) << message;
    }
  };
  expectRefused([&] { paged.evictRows(0, torch::ones({2, 4}, torch::kBool)); }, "evictRows");
  expectRefused([&] { paged.compact(0); }, "compact");
  expectRefused([&] { paged.evictFront(0, 1); }, "evictFront");
  expectRefused([&] { paged.evictBefore(0, 2); }, "evictFront");
  expectRefused([&] { paged.renumberRows(0, 3); }, "renumberRows");
  paged.evictFront(0, 0);  // evicting nothing changes nothing, in either layout
  EXPECT_EQ(paged.length(0), 4);
  EXPECT_FALSE(paged.keepMask(0).defined());
  EXPECT_EQ(paged.keptRows(0, 1), 4);
}

// ---- the block faults' switches --------------------------------------------

// (a) A rollback frees a block the table still maps; another sequence is
// handed it and writes its rows there, which the first sequence then reads.
TEST(PagedFaults, FreeMappedOnRollbackLetsAnotherSequenceOverwriteRows) {
  for (bool fault : {false, true}) {
    SCOPED_TRACE(fault ? "fault on" : "fault off");
    auto pool = smallPool(4);
    KvCache a(pool, 0), b(pool, 1);
    a.blockTable()->setFreeMappedOnRollback(fault);
    const auto a_rows = torch::full({2, 8, 4}, 1.0f);  // [kv_heads, 8, head_dim]
    appendAll(a, a_rows);
    a.crop(4);                          // a rejected draft: rows 4-7 and their block go
    appendAll(a, a_rows.narrow(1, 4, 3));  // the next round writes rows 4-6 again
    const auto a_keys_before = a.keys(0).clone();                // [kv_heads, 7, head_dim]
    const auto b_rows = torch::full({2, 4, 4}, 2.0f);
    appendAll(b, b_rows);
    EXPECT_EQ(pool->log().back().sequence, 1);
    if (fault) {
      // a still maps the block b was handed: b's rows show through a's keys.
      const int64_t shared = a.blockTable()->blocks()[1];
      EXPECT_EQ(b.blockTable()->blocks(), (std::vector<int64_t>{shared}));
      EXPECT_EQ(pool->owner(shared), 1);
      EXPECT_TRUE(pool->log()[2].still_mapped);
      EXPECT_FALSE(torch::equal(a.keys(0), a_keys_before));
      EXPECT_TRUE(torch::equal(a.keys(0).narrow(1, 4, 3), b_rows.narrow(1, 0, 3)));
      EXPECT_TRUE(torch::equal(a.keys(0).narrow(1, 0, 4), a_keys_before.narrow(1, 0, 4)));
    } else {
      EXPECT_TRUE(torch::equal(a.keys(0), a_keys_before));
      for (int64_t block : a.blockTable()->blocks()) EXPECT_EQ(pool->owner(block), 0);
    }
  }
}

// (b) A rollback that does not shorten the sequence: the rejected rows stay readable.
TEST(PagedFaults, KeepLengthOnRollbackLeavesRejectedRowsReadable) {
  for (bool fault : {false, true}) {
    SCOPED_TRACE(fault ? "fault on" : "fault off");
    auto pool = smallPool(2);
    KvCache a(pool, 0);
    a.blockTable()->setKeepLengthOnRollback(fault);
    const auto rows = torch::arange(40, torch::kFloat32).reshape({2, 5, 4});  // [kv_heads, 5, head_dim]
    appendAll(a, rows);
    a.crop(2);
    EXPECT_EQ(a.length(), fault ? 5 : 2);
    EXPECT_EQ(static_cast<int64_t>(a.blockTable()->blocks().size()), fault ? 3 : 1);
    EXPECT_TRUE(torch::equal(a.keys(0), rows.narrow(1, 0, fault ? 5 : 2)));
    EXPECT_EQ(pool->blocksInUse(), fault ? 3 : 1);
  }
}

// ---- hostile parameters -----------------------------------------------------

TEST(PagedCache, HostileParametersGiveClearErrors) {
  for (int64_t block_size : {int64_t{0}, int64_t{-1}, BlockPool::kMaxBlockSize + 1, int64_t{1} << 40}) {
    try {
      BlockPool pool(BlockPoolShape{2, 2, 4, block_size}, torch::kFloat32);
      ADD_FAILURE() << "block size " << block_size << " accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("block size"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(BlockPool(BlockPoolShape{0, 2, 4, 16}, torch::kFloat32), Error);
  EXPECT_THROW(BlockPool(BlockPoolShape{2, 2, 4, 16}, torch::kFloat32, 0), Error);
  EXPECT_THROW(BlockPool(BlockPoolShape{2, 2, 4, 16}, torch::kFloat32, int64_t{1} << 40), Error);
  EXPECT_THROW(KvCache(nullptr, 0), Error);
  auto pool = smallPool(4);
  EXPECT_THROW(KvCache(pool, -1), Error);
  EXPECT_THROW(pool->release(0, 0, 0), Error);  // never allocated: a double free
  EXPECT_THROW(pool->owner(99), Error);
  EXPECT_THROW(pool->keys(2), Error);
  KvCache a(pool, 0);
  EXPECT_THROW(a.append(0, torch::ones({3, 1, 4}), torch::ones({3, 1, 4})), Error);
  EXPECT_THROW(a.crop(1), Error);
}

TEST(PagedStorageLayout, ParsesContiguousAndPagedWithBlockSizes) {
  EXPECT_FALSE(parseStorageLayout("contiguous").paged);
  EXPECT_EQ(parseStorageLayout("paged").block_size, 16);
  EXPECT_EQ(parseStorageLayout("paged:3").block_size, 3);
  EXPECT_EQ(storageLayoutName(parseStorageLayout("paged:1")), "paged:1");
  EXPECT_EQ(storageLayoutName(parseStorageLayout("contiguous")), "contiguous");
  for (const std::string bad : {"paged:0", "paged:-3", "paged:", "paged:x", "paged:4097", "paged:99999999999999",
                                "Paged", "contiguous:4", ""}) {
    EXPECT_THROW(parseStorageLayout(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace kvscope
