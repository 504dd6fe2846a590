#include "core/check/paged_explanation.h"

#include <algorithm>
#include <set>

namespace kvscope {
namespace {

const CaptureCall* findCall(const CaptureManifest& manifest, CaptureRole role, int64_t index) {
  for (const CaptureCall& call : manifest.calls)
    if (call.role == role && call.index == index) return &call;
  return nullptr;
}

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

// A block mapped by `sequence` before the call (its role's previous state)
// and now by another sequence too, or twice by `sequence`: the pool handed
// out a block still mapped, which it does only after freeing it.
std::optional<int64_t> handedTo(const CaptureManifest& manifest, const CaptureCall& call, bool forward,
                                const CapturePagedState& now, size_t layer, size_t sequence, int64_t block) {
  const CaptureCall* previous = forward ? &call : findCall(manifest, call.role, call.index - 1);
  const std::optional<CaptureCacheState>& before = forward ? call.before : previous ? previous->after : call.before;
  if (!before || !before->paged || layer >= before->paged->layers.size()) return std::nullopt;
  const auto earlier = mappedBlocks(*before->paged, layer);
  if (sequence >= earlier.size() || !earlier[sequence].count(block)) return std::nullopt;
  for (size_t a = 0; a < now.layers[layer].size(); ++a) {
    if (a == sequence || (a < earlier.size() && earlier[a].count(block))) continue;
    for (int64_t slot : now.poolSlots(layer, a))
      if (slot >= 0 && slot / now.block_size == block) return static_cast<int64_t>(a);
  }
  int64_t mapped = 0;  // the same block at two places of the sequence's own table
  const auto own = now.poolSlots(layer, sequence);
  std::set<int64_t> offsets_seen;
  for (int64_t slot : own)
    if (slot >= 0 && slot / now.block_size == block && !offsets_seen.insert(slot % now.block_size).second) ++mapped;
  if (mapped > 0) return static_cast<int64_t>(sequence);
  return std::nullopt;
}

PagedRowFact factOf(const CaptureManifest& manifest, const CaptureCall& call, const RootCause& cause,
                    const CaptureCacheState& state, size_t layer, int64_t row, int64_t slot) {
  const CapturePagedState& paged = *state.paged;
  const auto sequence = static_cast<size_t>(cause.sequence);
  PagedRowFact fact;
  fact.layer = static_cast<int64_t>(layer);
  fact.row = row;
  fact.block = slot / paged.block_size;
  fact.offset = slot % paged.block_size;
  for (size_t a = 0; a < paged.layers[layer].size(); ++a) {
    if (a == sequence) continue;
    const auto pool = paged.poolSlots(layer, a);
    const auto attended = attendedSlots(pool);
    for (size_t i = 0; i < attended.size(); ++i) {
      if (pool[attended[i]] != slot) continue;
      fact.also_mapped_by.push_back(static_cast<int64_t>(a));
      // A row of `a` past the rows it held before a forward: `a` wrote it in this call.
      if (cause.forward() && !fact.written_by && static_cast<int64_t>(i) >= attendedCount(call.before, layer, a))
        fact.written_by = static_cast<int64_t>(a);
    }
  }
  fact.handed_to = handedTo(manifest, call, cause.forward(), paged, layer, sequence, fact.block);
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
  PagedExplanation out;
  for (int64_t row : cause.rows) {
    if (row < 0 || static_cast<size_t>(row) >= attended.size()) continue;  // a missing row has no slot
    out.rows.push_back(factOf(manifest, *call, cause, *state, layer, row, pool[attended[static_cast<size_t>(row)]]));
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
