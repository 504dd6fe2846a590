#include "core/cache/tracked_cache.h"

#include <torch/types.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_set>

#include "core/cache/block_table.h"
#include "core/cache/pool_picture.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

bool anyPositive(const std::vector<int64_t>& values) {
  return std::any_of(values.begin(), values.end(), [](int64_t v) { return v > 0; });
}

// The largest difference between what the cache stored (per layer
// [kv_heads, m, head_dim]) and what the forward computed, put in write order.
double storeError(const std::vector<at::Tensor>& stored_k, const std::vector<at::Tensor>& stored_v,
                  const std::vector<at::Tensor>& computed_k, const std::vector<at::Tensor>& computed_v,
                  const std::vector<int64_t>& order) {
  const auto index = torch::tensor(order, torch::kInt64);
  std::vector<at::Tensor> errors;  // per layer and K/V, a 0-d tensor: one read at the end
  for (size_t layer = 0; layer < stored_k.size(); ++layer) {
    const auto wanted_k = computed_k[layer].index_select(1, index).to(torch::kFloat32);
    const auto wanted_v = computed_v[layer].index_select(1, index).to(torch::kFloat32);
    errors.push_back((stored_k[layer].to(torch::kFloat32) - wanted_k).abs().max());
    errors.push_back((stored_v[layer].to(torch::kFloat32) - wanted_v).abs().max());
  }
  return torch::stack(errors).max().item<double>();
}

// Passes probes through to the caller's sink and keeps every layer's K and V
// as computed, to compare with what the cache stored and to copy.
class WriteRecorder : public ProbeSink {
 public:
  // keep_rows: whether the forward's K/V rows are wanted (to compare with
  // what a fault let the cache store, or to copy into another cache). Asking
  // for them costs a copy per layer, a tenth of a small drafter's forward.
  WriteRecorder(int64_t layers, ProbeSink* inner, bool keep_rows)
      : keys(layers), values(layers), inner_(inner), keep_rows_(keep_rows) {}
  bool wants(Probe probe, int64_t layer) const override {
    return (keep_rows_ && (probe == Probe::Key || probe == Probe::Value)) || (inner_ && inner_->wants(probe, layer));
  }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override {
    if (probe == Probe::Key) keys[layer] = value;
    if (probe == Probe::Value) values[layer] = value;
    if (inner_ && inner_->wants(probe, layer)) inner_->record(probe, layer, value);
  }
  std::vector<at::Tensor> keys, values;  // per layer [kv_heads, n, head_dim], compute dtype

 private:
  ProbeSink* inner_;
  bool keep_rows_;
};

// A paged cache's pool operations during one cache operation carry its
// moment and the index its event takes in the log (the operation logs its
// event last, and nothing else is logged to this session's log meanwhile:
// the lanes of a batch take turns, and each session has its own log), so
// the pool's log replays to any moment (core/cache/block_log.h). Cleared
// after the operation: the table's later operations are no one's.
class PoolOperationMoment {
 public:
  PoolOperationMoment(const KvCache& storage, const Moment& moment, const CacheEventLog& log)
      : table_(storage.blockTable()) {
    if (table_) table_->setMoment({moment.round, moment.phase, static_cast<int64_t>(log.events().size())});
  }
  ~PoolOperationMoment() {
    if (table_) table_->setMoment({});
  }
  PoolOperationMoment(const PoolOperationMoment&) = delete;
  PoolOperationMoment& operator=(const PoolOperationMoment&) = delete;

 private:
  BlockTable* table_;
};

// Adds to a rollback's fault_action the blocks it freed that the table
// still maps (the freed-block-reused fault), named by block and rows.
void noteBlocksFreedWhileMapped(CacheEvent& event, const std::vector<DanglingBlock>& before,
                                const std::vector<DanglingBlock>& after) {
  std::string freed;
  for (const DanglingBlock& d : after) {
    const bool already = std::any_of(before.begin(), before.end(), [&](const DanglingBlock& b) {
      return b.block == d.block && b.first_row == d.first_row;
    });
    if (already) continue;
    freed += (freed.empty() ? "" : ", ") + std::to_string(d.block) + " (rows " + std::to_string(d.first_row) + "-" +
             std::to_string(d.first_row + d.rows - 1) + ")";
  }
  if (freed.empty()) return;
  const std::string action = "freed pool block(s) " + freed + " on rollback while the block table still maps them";
  event.fault_action = event.fault_action.empty() ? action : event.fault_action + "; " + action;
}

// A paged cache's table and pool now (nullopt for a contiguous cache).
std::optional<PoolPicture> poolNow(const KvCache& storage) {
  const BlockTable* table = storage.blockTable();
  return table ? std::optional<PoolPicture>(pictureOf(*table)) : std::nullopt;
}

// Keeps, on a paged cache's table, its pool around the forward just logged
// as the session's last event: `before` as read when the forward was asked
// for, the pool now as after (a capture of the batch writes both).
void keepPoolAround(const KvCache& storage, const CacheEventLog& log, std::optional<PoolPicture> before) {
  BlockTable* table = storage.blockTable();
  if (table == nullptr || !before || log.events().empty()) return;
  table->forwardPictures()[log.events().size() - 1] = {std::move(*before), pictureOf(*table)};
}

}  // namespace

TrackedCache::TrackedCache(CacheRole role, std::unique_ptr<KvCache> storage, std::vector<int64_t> windows,
                           const FaultPolicy& faults, KvLedger& ledger, CacheEventLog& log)
    : role_(role), storage_(std::move(storage)), windows_(std::move(windows)), faults_(faults), ledger_(ledger), log_(log) {
  require(storage_ != nullptr, "tracked cache: no storage");
  require(static_cast<int64_t>(windows_.size()) == storage_->numLayers(),
          "tracked cache: one sliding window per layer expected");
  layout_.layers.resize(static_cast<size_t>(storage_->numLayers()));
  if (storage_->paged() && faults_.freesMappedBlocks(role_)) storage_->blockTable()->setFreeMappedOnRollback(true);
}

std::vector<int64_t> TrackedCache::rowsPerLayer() const {
  std::vector<int64_t> rows;
  for (int64_t layer = 0; layer < storage_->numLayers(); ++layer) {
    rows.push_back(rows_moved_ ? storage_->endPosition(layer) + storage_shift_ : storage_->length(layer));
  }
  return rows;
}

CacheEvent TrackedCache::eventAt(const Moment& moment, CacheEventKind kind) const {
  CacheEvent event;
  event.cache = role_;
  event.round = moment.round;
  event.phase = moment.phase;
  event.kind = kind;
  event.expected_rows = required_rows_;
  event.rows_before = rowsPerLayer();
  return event;
}

std::vector<DanglingBlock> TrackedCache::danglingBlocks() const {
  std::vector<DanglingBlock> dangling;
  const BlockTable* table = storage_->blockTable();
  if (table == nullptr) return dangling;
  const std::vector<int64_t>& blocks = table->blocks();
  // A block mapped again further on was handed back to this sequence for a
  // later block: the earlier mapping is the stale one.
  std::vector<bool> mapped_again(blocks.size(), false);
  std::unordered_set<int64_t> later;
  for (size_t i = blocks.size(); i-- > 0;) mapped_again[i] = !later.insert(blocks[i]).second;
  const int64_t size = table->blockSize();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t owner = table->pool()->owner(blocks[i]);
    if (owner == table->sequence() && !mapped_again[i]) continue;
    dangling.push_back({blocks[i], static_cast<int64_t>(i) * size, size, owner});
  }
  return dangling;
}

void TrackedCache::noteOverwrittenRows(CacheEvent& event) {
  const BlockTable* table = storage_->blockTable();
  if (table == nullptr) return;
  const BlockPool& pool = *table->pool();
  const int64_t size = table->blockSize();
  std::set<int64_t> rows;
  for (size_t i = 0; i < table->blocks().size(); ++i) {
    const int64_t block = table->blocks()[i];
    // Only its own blocks: a block it maps without owning is the dangling
    // mapping the walker names first (its foreign writer may be itself).
    if (pool.owner(block) != table->sequence()) continue;
    int64_t& seen = foreign_writes_seen_[block];
    if (pool.foreignWrites(block) == seen) continue;
    seen = pool.foreignWrites(block);
    for (int64_t layer = 0; layer < storage_->numLayers(); ++layer) {
      const auto& held = layout_.layers[static_cast<size_t>(layer)];
      const int64_t first = static_cast<int64_t>(i) * size;
      const int64_t end = std::min<int64_t>(first + size, static_cast<int64_t>(held.size()));
      for (int64_t row = first; row < end; ++row) {
        const int64_t row_of_entry = ledger_.entry(held[static_cast<size_t>(row)]).row;
        const auto stored_k = pool.keys(layer).select(0, block).select(1, row - first);  // [kv_heads, head_dim]
        const auto stored_v = pool.values(layer).select(0, block).select(1, row - first);
        const bool same = torch::equal(stored_k.to(torch::kFloat32), ledger_.keys(row_of_entry)[layer]) &&
                          torch::equal(stored_v.to(torch::kFloat32), ledger_.values(row_of_entry)[layer]);
        if (!same) {
          rows.insert(row);
          event.overwritten_by = pool.lastForeignWriter(block);
        }
      }
    }
  }
  event.overwritten_rows.assign(rows.begin(), rows.end());
}

void TrackedCache::logEvent(CacheEvent event) {
  event.dangling_blocks = danglingBlocks();
  // A window's contract, once it moved, holds for every later event that
  // does not say otherwise.
  if (event.expected_first.empty() && anyPositive(required_first_)) event.expected_first = required_first_;
  required_first_ = event.expected_first;
  applyEvent(layout_, event);
  noteOverwrittenRows(event);
  masks_.apply(event, static_cast<int64_t>(log_.events().size()));
  required_rows_ = event.expected_rows;
  log_.record(std::move(event));
}

std::vector<int64_t> TrackedCache::entriesLost(const CacheLayout& before, const CacheLayout& after) {
  // Entries are ledger indices, dense from 0: one flag per index in the
  // layouts' range, not a tree node per row (a prune of the bundled
  // target's 6 x 200 rows spent 2% of a speculative session in std::set).
  bool any = false;
  int64_t lowest = 0, highest = 0;
  for (const CacheLayout* layout : {&before, &after}) {
    for (const auto& rows : layout->layers) {
      for (int64_t entry : rows) {
        lowest = any ? std::min(lowest, entry) : entry;
        highest = any ? std::max(highest, entry) : entry;
        any = true;
      }
    }
  }
  if (!any) return {};
  enum Flag : uint8_t { kAbsent, kHeld, kListed };
  std::vector<uint8_t> flags(static_cast<size_t>(highest - lowest + 1), kAbsent);
  for (const auto& rows : after.layers) {
    for (int64_t entry : rows) flags[static_cast<size_t>(entry - lowest)] = kHeld;
  }
  std::vector<int64_t> lost;
  for (const auto& rows : before.layers) {
    for (int64_t entry : rows) {
      uint8_t& flag = flags[static_cast<size_t>(entry - lowest)];
      if (flag != kAbsent) continue;
      flag = kListed;
      lost.push_back(entry);
    }
  }
  return lost;
}

void TrackedCache::clearSwitches() {
  storage_->setWriteOrder(std::nullopt);
  storage_->setCausalAmongNewRows(true);
  storage_->setMasksPadding(true);
}

PlannedWrite TrackedCache::planWrite(Phase phase, const std::vector<int64_t>& stream) {
  const int64_t believed_length = static_cast<int64_t>(believed_.size());
  PlannedWrite write;
  write.phase = phase;
  write.start = faults_.feedStart(role_, phase, believed_length);
  const int64_t rope_start = write.start - storage_shift_;  // where a correct engine rotates it
  write.rope_start = rope_start + (write.start == believed_length ? position_shift_ : 0);
  write.tokens.assign(stream.begin() + write.start, stream.end());
  write.rows_before = rowsPerLayer();
  for (int64_t layer = 0; layer < storage_->numLayers(); ++layer) write.storage_rows_before.push_back(storage_->length(layer));
  write.expected_rows = static_cast<int64_t>(stream.size());
  const int64_t n = static_cast<int64_t>(write.tokens.size());
  if (bonus_position_ >= write.start && bonus_position_ < write.start + n) write.bonus_index = bonus_position_ - write.start;

  const WritePlan plan = faults_.write({role_, phase, n, write.rows_before.front(), write.bonus_index});
  write.fault_action = plan.fault_action;
  if (write.start != believed_length) write.fault_action = "fed the whole prefix again from position 0 on top of the cache";
  if (write.rope_start != rope_start) {
    const bool batch_offset = faults_.fault() == Fault::UniformAdvance;
    write.fault_action = "rotary positions start at " + std::to_string(write.rope_start) + " instead of " +
                         std::to_string(rope_start) +
                         (batch_offset ? " (the batch's offset ran ahead of this sequence's length)"
                                       : " (the position counter was not rewound after a rollback)");
  }
  if (faults_.halfPrecisionStorage()) write.fault_action = "stored K/V in float16";
  write.order = plan.order.value_or(std::vector<int64_t>());
  if (!plan.order) {
    for (int64_t i = 0; i < n; ++i) write.order.push_back(i);
  }
  storage_->setWriteOrder(plan.order);
  storage_->setCausalAmongNewRows(plan.causal_among_new);
  storage_->setMasksPadding(faults_.masksPadding(phase));
  if (!storage_->masksPadding() && storage_->padRows() > 0) {
    write.fault_action = "the padding mask was not applied after the prefill: this forward attended the sequence's " +
                         std::to_string(storage_->padRows()) + " pad row(s)";
  }
  return write;
}

at::Tensor TrackedCache::forward(const CausalLM& model, Phase phase, const std::vector<int64_t>& stream, int64_t round,
                                 ProbeSink* probes, int64_t logit_rows, TrackedCache* copy_to) {
  const PlannedWrite write = planWrite(phase, stream);
  std::optional<PoolPicture> pool_before = poolNow(*storage_);  // before a batch's other sequences join in
  WriteRecorder computed(numLayers(), probes, /*keep_rows=*/faults_.active() || copy_to != nullptr);
  const auto ids = idsTensor(write.tokens);  // [fed]
  at::Tensor logits;
  AddedPadding pads;  // what a padded batch added to this forward
  // Set before the batcher takes the forward: it writes this cache's rows
  // (and maps their blocks) on its own thread.
  const PoolOperationMoment pool_moment(*storage_, {round, phase}, log_);
  try {
    // A fault's feed may not match the cache's length: only the unchecked
    // forward lets it happen, so that the audit can see it.
    SequenceForward feed{ids, write.rope_start, storage_.get(), &computed, logit_rows, faults_.active(), {}, nullptr};
    feed.padding_out = &pads;
    logits = runner_->run(model, feed);  // [rows, vocab]
  } catch (...) {
    clearSwitches();  // the forward failed: nothing written, nothing logged
    throw;
  }
  logWrite(write, round, computed.keys, computed.values, pads);
  keepPoolAround(*storage_, log_, std::move(pool_before));
  if (copy_to) copy_to->copyRows(phase, stream, round, computed.keys, computed.values);
  return logits;
}

void TrackedCache::copyRows(Phase phase, const std::vector<int64_t>& stream, int64_t round,
                            const std::vector<at::Tensor>& keys, const std::vector<at::Tensor>& values) {
  const PlannedWrite write = planWrite(phase, stream);
  std::optional<PoolPicture> pool_before = poolNow(*storage_);
  const PoolOperationMoment pool_moment(*storage_, {round, phase}, log_);
  try {
    require(static_cast<int64_t>(keys.size()) == numLayers() && keys.size() == values.size() && keys.front().defined() &&
                static_cast<int64_t>(write.tokens.size()) == keys.front().size(1),
            "tracked cache: copied rows must be the rows of the tokens the cache does not hold yet, in every layer");
    for (int64_t l = 0; l < numLayers(); ++l) storage_->append(l, keys[l], values[l]);  // [kv_heads, fed, head_dim]
  } catch (...) {
    clearSwitches();
    throw;
  }
  logWrite(write, round, keys, values);
  keepPoolAround(*storage_, log_, std::move(pool_before));
}

std::vector<RowIdentity> TrackedCache::writtenIdentities(const PlannedWrite& write, const AddedPadding& pads) {
  std::vector<RowIdentity> identities(static_cast<size_t>(pads.before), RowIdentity::pad(pads.token));
  for (int64_t i : write.order) identities.push_back({write.tokens[i], write.start + i, write.rope_start + i});
  identities.insert(identities.end(), static_cast<size_t>(pads.after), RowIdentity::pad(pads.token));
  return identities;
}

std::vector<int64_t> TrackedCache::hiddenPadding(const CacheEvent& append, bool hides_prefix, int64_t pads_after) const {
  std::vector<int64_t> hidden;
  const auto is_pad = [&](int64_t entry) { return ledger_.entry(entry).padding; };
  if (hides_prefix && !layout_.layers.empty()) {
    for (int64_t entry : layout_.layers.front()) {
      if (is_pad(entry)) hidden.push_back(entry);
    }
  }
  const auto written = static_cast<int64_t>(append.written.size());
  for (int64_t i = 0; i < written; ++i) {
    const int64_t entry = append.written[static_cast<size_t>(i)];
    const bool after_inputs = i >= written - pads_after;
    if (is_pad(entry) && (hides_prefix || after_inputs)) hidden.push_back(entry);
  }
  return hidden;
}

void TrackedCache::dropPadding(const Moment& moment, int64_t count) {
  CacheEvent event = eventAt(moment, CacheEventKind::DropPadding);
  event.reason = DeathReason::Padding;
  for (int64_t layer = 0; layer < storage_->numLayers(); ++layer) {
    storage_->cropLayer(layer, std::max<int64_t>(storage_->length(layer) - count, 0));
  }
  event.rows_after = rowsPerLayer();
  const auto& rows = layout_.layers.front();
  event.removed.assign(rows.end() - std::min<int64_t>(count, static_cast<int64_t>(rows.size())), rows.end());
  for (int64_t entry : event.removed) ledger_.recordDeath(entry, moment.round, moment.phase, DeathReason::Padding);
  logEvent(std::move(event));
}

// The written rows into the ledger, each layer's read as stored, and under a
// fault compared with what the forward computed (event.max_store_error).
int64_t TrackedCache::recordBirthsChecked(const PlannedWrite& write, const std::vector<RowIdentity>& identities,
                                          const std::vector<at::Tensor>& computed_k,
                                          const std::vector<at::Tensor>& computed_v,
                                          const std::vector<int64_t>& store_order, int64_t round, CacheEvent& event) {
  const auto m = static_cast<int64_t>(identities.size());
  std::vector<at::Tensor> k_rows, v_rows;
  for (int64_t layer = 0; layer < storage_->numLayers(); ++layer) {
    const int64_t first_row = write.storage_rows_before[layer];
    k_rows.push_back(storage_->keys(layer).narrow(1, first_row, m));  // [kv_heads, m, head_dim] as stored
    v_rows.push_back(storage_->values(layer).narrow(1, first_row, m));
  }
  if (faults_.active()) event.max_store_error = storeError(k_rows, v_rows, computed_k, computed_v, store_order);
  return ledger_.recordBirths(role_, identities, k_rows, v_rows, round, write.phase);
}

// The written rows into the ledger in one plain copy from float32 storage.
int64_t TrackedCache::recordPlainBirths(const PlannedWrite& write, const std::vector<RowIdentity>& identities, int64_t m,
                                        int64_t round) {
  const auto [k32, v32] = storage_->copyRows(write.storage_rows_before, m);  // [layers, kv_heads, m, head_dim] each
  return ledger_.recordBirths(role_, identities, k32, v32, round, write.phase);
}

void TrackedCache::logWrite(const PlannedWrite& write, int64_t round, const std::vector<at::Tensor>& computed_k,
                            const std::vector<at::Tensor>& computed_v, const AddedPadding& pads) {
  const bool hides_prefix = storage_->masksPadding();  // the switch this forward ran with
  clearSwitches();
  CacheEvent event = eventAt({round, write.phase}, refeed_pending_ > 0 ? CacheEventKind::Refeed : CacheEventKind::Append);
  event.rows_before = write.rows_before;
  event.rows_after = rowsPerLayer();
  event.expected_rows = write.expected_rows;
  event.fault_action = write.fault_action;
  const bool padded = pads.before > 0 || pads.after > 0;
  const auto m = static_cast<int64_t>(write.order.size()) + pads.before + pads.after;  // rows in the storage
  if (m > 0) {
    const std::vector<RowIdentity> identities = writtenIdentities(write, pads);
    // Without an injected fault the cache stores a plain copy of what the
    // forward computed, in the same dtype and order: comparing them would
    // cost more than a small drafter's forward and could only find equality.
    const bool checked = faults_.active() || !storage_->plainAppendApplies();
    // A padded forward computed its pads too, in row order (no fault that
    // reorders a write runs padded: SessionOptions::validate).
    std::vector<int64_t> row_order;
    if (checked && padded) {
      row_order.resize(static_cast<size_t>(m));
      std::iota(row_order.begin(), row_order.end(), int64_t{0});
    }
    const int64_t first = checked ? recordBirthsChecked(write, identities, computed_k, computed_v,
                                                        padded ? row_order : write.order, round, event)
                                  : recordPlainBirths(write, identities, m, round);
    for (int64_t i = 0; i < m; ++i) event.written.push_back(first + i);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(write.tokens.size()); ++i) {
    if (std::find(write.order.begin(), write.order.end(), i) == write.order.end()) {
      event.unwritten.emplace_back(write.tokens[static_cast<size_t>(i)], write.rope_start + i);
    }
  }
  if (write.bonus_index >= 0) bonus_position_ = -1;  // fed (written or not)
  refeed_pending_ = 0;
  believed_.resize(static_cast<size_t>(write.start));
  believed_.insert(believed_.end(), write.tokens.begin(), write.tokens.end());
  if (padded || storage_->padRows() > 0) event.hidden_padding = hiddenPadding(event, hides_prefix, pads.after);
  if (pads.before > 0) storage_->setPadRows(storage_->padRows() + pads.before);  // the prompt's left padding stays
  logEvent(std::move(event));
  if (pads.after > 0) dropPadding({round, write.phase}, pads.after);
}

void TrackedCache::prune(int64_t round, const PruneRequestOfRound& request) {
  const int64_t required = std::min(required_rows_, request.keep);
  const PruneAction action =
      faults_.prune({role_, static_cast<int64_t>(believed_.size()), request.keep, request.accepted, storage_->numLayers(),
                     request.batch_most_accepted, request.last_in_batch});
  const int64_t dropped = static_cast<int64_t>(believed_.size()) - action.believed_after;
  if (required == required_rows_ && action.crop_to < 0) return;  // nothing required, nothing done
  believed_.resize(static_cast<size_t>(action.believed_after));
  if (!faults_.rewindsPositions() && dropped > 0) position_shift_ += dropped;
  position_shift_ += action.position_shift;

  const std::vector<DanglingBlock> dangling_before = danglingBlocks();
  CacheEvent event = eventAt({round, Phase::Prune}, action.kind);
  event.reason = action.reason;
  event.expected_rows = required;
  event.fault_action = action.fault_action;
  if (action.crop_to >= 0) {
    const PoolOperationMoment pool_moment(*storage_, {round, Phase::Prune}, log_);
    for (int64_t layer = 0; layer < action.layers_cropped; ++layer) {
      // crop_to counts positions; a sliding window's layer starts later, and
      // gathered rows keep only the positions after the last of them in order.
      const int64_t length = storage_->length(layer);
      const int64_t rows = rows_moved_ ? length - (storage_->endPosition(layer) + storage_shift_ - action.crop_to)
                                       : action.crop_to - storage_->firstPosition(layer);
      storage_->cropLayer(layer, std::clamp<int64_t>(rows, 0, length));
    }
  }
  event.rows_after = rowsPerLayer();
  noteBlocksFreedWhileMapped(event, dangling_before, danglingBlocks());
  CacheLayout after = layout_;
  applyEvent(after, event);
  int64_t refeed = 0;
  for (int64_t entry : entriesLost(layout_, after)) {
    event.removed.push_back(entry);
    const LedgerEntry& e = ledger_.entry(entry);
    if (e.reason == DeathReason::Eviction) continue;  // no head read it since a policy masked it: died then
    DeathReason reason = action.reason;
    if (reason == DeathReason::RejectedDraft && e.position < request.first_wrong_position) {
      reason = DeathReason::Refeed;  // a correct entry cut on purpose (seed bookkeeping)
      ++refeed;
    }
    ledger_.recordDeath(entry, round, Phase::Prune, reason);
  }
  if (request.seed_bookkeeping) refeed_pending_ = refeed;
  logEvent(std::move(event));
}

void TrackedCache::slideWindows(const Moment& moment) {
  const int64_t next_position = static_cast<int64_t>(believed_.size());
  std::vector<int64_t> first = required_first_;
  first.resize(static_cast<size_t>(storage_->numLayers()), 0);
  // Layers that lose the same front rows share one event; the contract moves
  // by the true window whatever the fault does.
  std::map<std::vector<int64_t>, std::vector<int64_t>> layers_by_removed;
  std::string fault_action;
  for (int64_t layer = 0; layer < storage_->numLayers(); ++layer) {
    const int64_t window = windows_[static_cast<size_t>(layer)];
    if (window <= 0) continue;
    first[static_cast<size_t>(layer)] = std::max<int64_t>(0, next_position - (window - 1));
    const WindowPlan plan = faults_.window(role_, window);
    const int64_t count = std::clamp<int64_t>(next_position - plan.keep_before_query - storage_->firstPosition(layer), 0,
                                              storage_->length(layer));
    if (count == 0) continue;
    const auto& rows = layout_.layers[static_cast<size_t>(layer)];
    const std::vector<int64_t> removed(rows.begin(), rows.begin() + std::min<int64_t>(count, rows.size()));
    layers_by_removed[removed].push_back(layer);
    if (!plan.fault_action.empty()) fault_action = plan.fault_action;
  }
  if (layers_by_removed.empty()) {
    // Nothing physically left the window (e.g. the cache was just cleared);
    // the contract still moves, and the next logged event carries it.
    if (anyPositive(first)) required_first_ = first;
    return;
  }
  for (const auto& [removed, layers] : layers_by_removed) {
    CacheEvent event = eventAt(moment, CacheEventKind::Evict);
    event.reason = DeathReason::Eviction;
    event.expected_first = first;
    event.layers = layers.size() == static_cast<size_t>(storage_->numLayers()) ? std::vector<int64_t>() : layers;
    event.fault_action = fault_action;
    for (int64_t layer : layers) storage_->evictFront(layer, static_cast<int64_t>(removed.size()));
    event.rows_after = rowsPerLayer();
    event.removed = removed;
    // Entries no layer holds any more die now (Gemma 2's global layers keep theirs).
    CacheLayout after = layout_;
    applyEvent(after, event);
    for (int64_t entry : entriesLost(layout_, after)) {
      ledger_.recordDeath(entry, moment.round, moment.phase, DeathReason::Eviction);
    }
    logEvent(std::move(event));
  }
}

std::vector<RemovedRow> TrackedCache::evict(const Moment& moment, const std::string& policy,
                                            const EvictionDecision& decision) {
  std::vector<RemovedRow> removed = applyEviction(*storage_, decision, /*demote_bits=*/0).removed;
  if (!removed.empty()) logMasked(moment, policy, removed);  // within budget: nothing happened, nothing to log
  return removed;
}

CompressionOutcome TrackedCache::compress(const Moment& moment, const std::string& name,
                                          const CompressionRequest& request) {
  CompressionOutcome done = compressCache(*storage_, request);
  // Demoted rows stay visible (as low-precision copies): no kv head stops reading them.
  const bool masked = request.eviction && request.eviction->demote_bits == 0;
  logMasked(moment, name, masked ? done.removed : std::vector<RemovedRow>());
  return done;
}

void TrackedCache::moveRows(const std::function<int64_t(KvCache&)>& gather) {
  storage_shift_ += gather(*storage_);
  rows_moved_ = true;
}

void TrackedCache::logMasked(const Moment& moment, const std::string& policy, const std::vector<RemovedRow>& removed) {
  CacheEvent event = eventAt(moment, CacheEventKind::Evict);
  event.reason = DeathReason::Eviction;
  event.policy = policy;
  event.rows_after = event.rows_before;
  std::set<int64_t> touched;
  std::set<std::tuple<int64_t, int64_t, int64_t>> masked_now;  // (entry, layer, kv head)
  for (const RemovedRow& r : removed) {
    // The layout mirrors the storage row for row: the entry the masked row holds.
    const auto& rows = layout_.layers.at(static_cast<size_t>(r.layer));
    const int64_t row = r.position - storage_->firstPosition(r.layer);
    if (row < 0 || row >= static_cast<int64_t>(rows.size())) continue;
    event.masked.push_back({rows[static_cast<size_t>(row)], r.layer, r.kv_head, r.score});
    touched.insert(rows[static_cast<size_t>(row)]);
    masked_now.emplace(rows[static_cast<size_t>(row)], r.layer, r.kv_head);
  }
  // An entry no head of any layer holding it reads any more is gone for
  // attention: it dies now. (The masks before this event plus its own; no
  // copy of every mask per TOVA step.)
  const auto masked_after = [&](int64_t entry, int64_t layer, int64_t head) {
    return masks_.masked(entry, layer, head) || masked_now.count({entry, layer, head}) > 0;
  };
  for (int64_t entry : touched) {
    bool read = false;
    for (size_t l = 0; l < layout_.layers.size() && !read; ++l) {
      const auto& rows = layout_.layers[l];
      if (std::find(rows.begin(), rows.end(), entry) == rows.end()) continue;
      for (int64_t h = 0; h < storage_->kvHeads() && !read; ++h) read = !masked_after(entry, static_cast<int64_t>(l), h);
    }
    if (read) continue;
    ledger_.recordDeath(entry, moment.round, moment.phase, DeathReason::Eviction);
    event.removed.push_back(entry);
  }
  logEvent(std::move(event));
}

}  // namespace kvscope
