#include "core/check/paged_explanation.h"

#include <map>
#include <set>
#include <utility>

namespace kvscope {
namespace {

// The slots a sequence attends, in order: every slot but padding.
std::vector<size_t> attendedSlots(const std::vector<int64_t>& pool) {
  std::vector<size_t> slots;
  for (size_t j = 0; j < pool.size(); ++j)
    if (pool[j] != kCapturePaddingSlot) slots.push_back(j);
  return slots;
}

int64_t attendedCount(const std::optional<CaptureCacheState>& state, size_t layer, size_t sequence) {
  if (!state || layer >= state->layers.size() || sequence >= state->layers[layer].sequence_runs.size()) return 0;
  int64_t rows = 0;
  for (const CaptureSlotRun& run : state->layers[layer].sequence_runs[sequence])
    if (run.first != kCapturePaddingSlot) rows += run.count;
  return rows;
}

// The blocks each sequence's table maps in one layer of a state.
std::vector<std::set<int64_t>> mappedBlocks(const CapturePagedState& paged, size_t layer) {
  std::vector<std::set<int64_t>> blocks(paged.layers.at(layer).size());
  for (size_t b = 0; b < blocks.size(); ++b)
    for (int64_t slot : paged.poolSlots(layer, b))
      if (slot >= 0) blocks[b].insert(slot / paged.block_size);
  return blocks;
}

// One layer of the named state, indexed once (a state holds at most 2^20
// slots across its sequences), so each wrong row's facts are looked up.
struct PoolIndex {
  std::map<int64_t, std::vector<std::pair<size_t, int64_t>>> holders;  // pool slot -> (sequence, attended index)
  std::map<int64_t, std::set<size_t>> block_holders;                   // block -> sequences mapping it now
  std::vector<std::set<int64_t>> blocks_before;  // per sequence, the blocks its table mapped before (empty: unknown)
  std::vector<int64_t> rows_before;              // per sequence, the rows it held before a forward
};

// The state before the change the root cause names: the call's `before` for a
// forward, the role's previous `after` for a change between calls.
const std::optional<CaptureCacheState>* earlierState(const CaptureManifest& manifest, const CaptureCall& call,
                                                     bool forward) {
  if (forward) return &call.before;
  const CaptureCall* previous = findCall(manifest, call.role, call.index - 1);
  return previous ? &previous->after : nullptr;
}

PoolIndex indexPool(const CaptureManifest& manifest, const CaptureCall& call, bool forward,
                    const CapturePagedState& now, size_t layer) {
  PoolIndex index;
  const size_t batch = now.layers[layer].size();
  for (size_t b = 0; b < batch; ++b) {
    int64_t i = 0;
    for (int64_t slot : now.poolSlots(layer, b)) {
      if (slot == kCapturePaddingSlot) continue;
      index.holders[slot].push_back({b, i++});
      index.block_holders[slot / now.block_size].insert(b);
    }
    index.rows_before.push_back(forward ? attendedCount(call.before, layer, b) : 0);
  }
  const auto* earlier = earlierState(manifest, call, forward);
  if (earlier && *earlier && (*earlier)->paged && layer < (*earlier)->paged->layers.size())
    index.blocks_before = mappedBlocks(*(*earlier)->paged, layer);
  return index;
}

// A block `sequence` mapped before and that another sequence maps now (one
// that did not before), or a pool slot `sequence` maps twice: the pool
// handed out a block still mapped, which it does only after freeing it.
std::optional<int64_t> handedTo(const PoolIndex& index, size_t sequence, int64_t block, int64_t slot) {
  if (sequence >= index.blocks_before.size() || !index.blocks_before[sequence].count(block)) return std::nullopt;
  for (size_t a : index.block_holders.at(block)) {
    if (a != sequence && (a >= index.blocks_before.size() || !index.blocks_before[a].count(block)))
      return static_cast<int64_t>(a);
  }
  int64_t own = 0;
  for (const auto& holder : index.holders.at(slot)) own += holder.first == sequence;
  if (own > 1) return static_cast<int64_t>(sequence);
  return std::nullopt;
}

PagedRowFact factOf(const PoolIndex& index, const RootCause& cause, const CapturePagedState& paged, size_t layer,
                    int64_t row, int64_t slot) {
  const auto sequence = static_cast<size_t>(cause.sequence);
  PagedRowFact fact;
  fact.layer = static_cast<int64_t>(layer);
  fact.row = row;
  fact.block = slot / paged.block_size;
  fact.offset = slot % paged.block_size;
  for (const auto& [a, i] : index.holders.at(slot)) {
    if (a == sequence) continue;
    fact.also_mapped_by.push_back(static_cast<int64_t>(a));
    // A row of `a` past the rows it held before a forward: `a` wrote it in this call.
    if (cause.forward() && !fact.written_by && i >= index.rows_before[a]) fact.written_by = static_cast<int64_t>(a);
  }
  fact.handed_to = handedTo(index, sequence, fact.block, slot);
  fact.on_free_list = paged.blockFree(fact.block);
  fact.past_length = cause.actual_rows > cause.expected_rows && row >= cause.expected_rows;
  return fact;
}

std::string sentenceOf(const PagedRowFact& f, const RootCause& cause, size_t more) {
  const int64_t sequence = cause.sequence;
  std::string out = "; in the paged pool, row " + std::to_string(f.row) + " is in block " + std::to_string(f.block) +
                    " (offset " + std::to_string(f.offset) + ")";
  if (f.written_by)
    out += ", where sequence " + std::to_string(*f.written_by) + " wrote its own row in this call (another sequence's row)";
  else if (!f.also_mapped_by.empty())
    out += ", which sequence " + std::to_string(f.also_mapped_by.front()) + "'s table maps too";
  if (f.handed_to) {
    out += ": the block was freed while sequence " + std::to_string(sequence) + "'s table still mapped it, then given to " +
           (*f.handed_to == sequence ? "it again" : "sequence " + std::to_string(*f.handed_to)) + " (a freed block)";
  }
  if (f.on_free_list) out += ", and is on the free list";
  if (f.past_length) out += ", past the " + std::to_string(cause.expected_rows) + " rows the sequence should hold";
  if (more > 0) out += " (and " + std::to_string(more) + " more row(s): row_details)";
  return out;
}

}  // namespace

std::optional<PagedExplanation> explainPagedRows(const CaptureManifest& manifest, const RootCause& cause) {
  const CaptureRole role = cause.cache == CacheRole::Target ? CaptureRole::Target : CaptureRole::Drafter;
  const CaptureCall* call = findCall(manifest, role, cause.call);
  if (call == nullptr) return std::nullopt;
  const std::optional<CaptureCacheState>& state = cause.forward() ? call->after : call->before;
  if (!state || !state->paged) return std::nullopt;
  const size_t layer = cause.layers.empty() ? 0 : static_cast<size_t>(cause.layers.front());
  const auto sequence = static_cast<size_t>(cause.sequence);
  if (layer >= state->paged->layers.size() || sequence >= state->paged->layers[layer].size()) return std::nullopt;
  const auto pool = state->paged->poolSlots(layer, sequence);
  const auto attended = attendedSlots(pool);
  const PoolIndex index = indexPool(manifest, *call, cause.forward(), *state->paged, layer);
  PagedExplanation out;
  for (int64_t row : cause.rows) {
    if (row < 0 || static_cast<size_t>(row) >= attended.size()) continue;  // a missing row has no slot
    out.rows.push_back(factOf(index, cause, *state->paged, layer, row, pool[attended[static_cast<size_t>(row)]]));
  }
  if (!out.rows.empty()) out.sentence = sentenceOf(out.rows.front(), cause, out.rows.size() - 1);
  return out;
}

void addPagedFacts(nlohmann::json& root_cause, const PagedExplanation& explanation) {
  if (!root_cause.contains("row_details")) return;
  for (nlohmann::json& detail : root_cause["row_details"]) {
    for (const PagedRowFact& f : explanation.rows) {
      if (detail.value("layer", int64_t{-1}) != f.layer || detail.value("row", int64_t{-1}) != f.row) continue;
      detail["block"] = f.block;
      detail["offset"] = f.offset;
      detail["also_mapped_by"] = f.also_mapped_by;
      detail["written_by"] = f.written_by ? nlohmann::json(*f.written_by) : nlohmann::json();
      detail["freed_and_handed_to"] = f.handed_to ? nlohmann::json(*f.handed_to) : nlohmann::json();
      detail["on_free_list"] = f.on_free_list;
      detail["past_length"] = f.past_length;
    }
  }
}

}  // namespace kvscope
