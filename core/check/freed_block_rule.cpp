#include "core/check/freed_block_rule.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

namespace kvscope {
namespace {

const CapturePagedState* pagedOf(const std::optional<CaptureCacheState>& state) {
  return state && state->paged ? &*state->paged : nullptr;
}

// The pool slots of the rows `sequence` holds in one layer, in row order (padding left out).
std::vector<int64_t> heldSlots(const CapturePagedState& paged, size_t layer, size_t sequence) {
  std::vector<int64_t> held;
  if (layer >= paged.layers.size() || sequence >= paged.layers[layer].size()) return held;
  for (int64_t slot : paged.poolSlots(layer, sequence))
    if (slot >= 0) held.push_back(slot);
  return held;
}

// Per block `sequence`'s rows are in, the logical blocks (row / block_size) that map it.
std::map<int64_t, std::set<int64_t>> logicalBlocks(const CapturePagedState& paged, size_t layer, size_t sequence) {
  std::map<int64_t, std::set<int64_t>> out;
  const std::vector<int64_t> held = heldSlots(paged, layer, sequence);
  for (size_t row = 0; row < held.size(); ++row)
    out[held[row] / paged.block_size].insert(static_cast<int64_t>(row) / paged.block_size);
  return out;
}

bool mapsBlock(const CapturePagedState& paged, size_t layer, size_t sequence, int64_t block) {
  for (int64_t slot : heldSlots(paged, layer, sequence))
    if (slot / paged.block_size == block) return true;
  return false;
}

// The first layer where `sequence` holds rows in `paged` (a recurrent layer holds none).
std::optional<size_t> layerWithRows(const CapturePagedState& paged, size_t sequence) {
  for (size_t l = 0; l < paged.layers.size(); ++l)
    if (!heldSlots(paged, l, sequence).empty()) return l;
  return std::nullopt;
}

constexpr int64_t kNotStale = -2;

// What a later call's after state shows at the rows `sequence` held in block
// `block` before the change (its logical block `logical`, rows logical *
// block_size on): nullopt while the sequence holds no row there yet;
// kNotStale when its table maps another block there now, or the pool handed
// the block back to it for those rows (a correct engine's reuse); else who
// the pool gave the freed block to while the table still mapped it: -1 while
// it is still on the free list, another sequence that holds it now, or the
// sequence itself when it holds the block for later rows too.
std::optional<int64_t> reuseSeen(const CapturePagedState& now, const CapturePagedState& then, size_t layer,
                                 size_t sequence, int64_t block, int64_t logical) {
  const std::vector<int64_t> held = heldSlots(now, layer, sequence);
  const int64_t first_row = logical * now.block_size;
  if (static_cast<int64_t>(held.size()) <= first_row) return std::nullopt;
  if (held[static_cast<size_t>(first_row)] / now.block_size != block) return kNotStale;
  if (now.blockFree(block)) return -1;
  for (size_t other = 0; other < now.layers.at(layer).size(); ++other) {
    if (other != sequence && mapsBlock(now, layer, other, block) && !mapsBlock(then, layer, other, block))
      return static_cast<int64_t>(other);
  }
  if (logicalBlocks(now, layer, sequence).at(block).size() > 1) return static_cast<int64_t>(sequence);
  return kNotStale;
}

// The blocks the change before `call` freed past the rows it kept that the
// sequence's table still maps, as the first later call of the role that
// reaches their rows shows them (so a scan stops there).
std::vector<DanglingBlock> freedWhileMapped(const CaptureManifest& file, const CaptureCall& previous,
                                            const CaptureCall& call, size_t sequence) {
  std::vector<DanglingBlock> out;
  const CapturePagedState* then = pagedOf(previous.after);
  const CapturePagedState* now = pagedOf(call.before);
  if (!then || !now || !now->free || then->block_size != now->block_size) return out;
  const auto layer = layerWithRows(*then, sequence);
  if (!layer) return out;
  const auto held_now = logicalBlocks(*now, *layer, sequence);
  for (const auto& [block, logical] : logicalBlocks(*then, *layer, sequence)) {
    if (!now->blockFree(block) || held_now.count(block)) continue;  // kept, or holding kept rows
    for (const CaptureCall& later : file.calls) {
      if (later.role != call.role || later.index < call.index) continue;
      const CapturePagedState* after = pagedOf(later.after);
      if (!after || !after->free || after->block_size != then->block_size) break;
      const int64_t first = *logical.begin();
      const auto seen = reuseSeen(*after, *then, *layer, sequence, block, first);
      if (!seen) continue;
      if (*seen != kNotStale) out.push_back({block, first * then->block_size, then->block_size, *seen});
      break;
    }
  }
  return out;
}

}  // namespace

int64_t markBlocksFreedWhileMapped(const CaptureManifest& file, int64_t sequence, const CaptureManifest& view,
                                   const CaptureTimeline& timeline, CaptureRecordView& record) {
  if (file.version < 3 || sequence < 0 || sequence >= file.batch) return 0;
  std::vector<CacheEvent> events = record.record.events.events();
  int64_t marked = 0;
  for (size_t s = 0; s < timeline.steps.size(); ++s) {
    const CaptureStep& step = timeline.steps[s];
    if (step.operation != CaptureOperation::Between) continue;
    const CaptureCall& seen = view.calls.at(step.manifest_call);
    const CaptureCall* previous = nullptr;  // the sequence's own previous call of the role
    for (size_t c = 0; c < step.manifest_call; ++c)
      if (view.calls[c].role == seen.role) previous = &view.calls[c];
    const CaptureCall* call = findCall(file, seen.role, seen.index);
    const CaptureCall* before = previous ? findCall(file, previous->role, previous->index) : nullptr;
    if (!call || !before) continue;
    auto blocks = freedWhileMapped(file, *before, *call, static_cast<size_t>(sequence));
    if (blocks.empty()) continue;
    events.at(record.event_of_step.at(s)).dangling_blocks = std::move(blocks);
    ++marked;
  }
  if (marked > 0) record.record.events.restore(std::move(events));
  return marked;
}

std::string freedBlocksText(const RootCause& cause) {
  std::string out;
  for (const DanglingBlock& d : cause.dangling_blocks) {
    out += out.empty() ? "; its block table still maps " : ", and ";
    out += "block " + std::to_string(d.block) + " (rows " + std::to_string(d.first_row) + "-" +
           std::to_string(d.first_row + d.rows - 1) + "), which the pool freed: the sequence wrote its next rows there " +
           (d.owner < 0 ? std::string("while the block was still on the free list")
                        : "after the pool had handed the block to sequence " + std::to_string(d.owner));
  }
  return out.empty() ? out : out + " (a freed block)";
}

}  // namespace kvscope
