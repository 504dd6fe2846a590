#include "ui/context/RowHistory.h"

namespace kvscope::ui {
namespace {

std::vector<RowAttention> attentionOf(const SessionSnapshot& s, const LedgerEntry& e, int64_t entry, int64_t layer) {
  std::vector<RowAttention> received;
  if (e.cache != CacheRole::Target) return received;
  for (const auto& [round, data] : s.attention) {
    if (round < e.born_round) continue;
    std::vector<float> per_head = attentionReceived(s, round, layer, entry);
    if (!per_head.empty()) received.push_back({round, std::move(per_head)});
  }
  return received;
}

// Rows of a paged cache never move (the paged layout refuses compaction and
// front eviction), so a row's logical block is row / block_size at every
// moment; its pool block is the table's as the run left it while the entry
// is still held, and unknown once it is gone (the block may have been reused).
std::vector<std::optional<RowBlock>> blocksOf(const SessionSnapshot& s, const LedgerEntry& e,
                                              const std::vector<RowHistoryItem>& events) {
  std::vector<std::optional<RowBlock>> blocks;
  const PoolView* pool = s.pool(e.cache).get();
  if (!pool || pool->block_size <= 0) return blocks;
  const bool held_at_end = e.died_round < 0;
  for (const RowHistoryItem& item : events) {
    if (item.row_after < 0) {
      blocks.push_back(std::nullopt);
      continue;
    }
    RowBlock place{item.row_after / pool->block_size, item.row_after % pool->block_size, -1, false};
    if (held_at_end) {
      if (const auto live = pool->placeOfRow(s.shown_sequence, item.row_after)) {
        place.block = live->block;
        place.dangling = live->dangling;
      }
    }
    blocks.push_back(place);
  }
  return blocks;
}

}  // namespace

std::string rowBlockText(const RowBlock& place) {
  const std::string offset = ", offset " + std::to_string(place.offset);
  if (place.block < 0) return "logical block " + std::to_string(place.logical) + offset;
  return "block " + std::to_string(place.block) + offset + (place.dangling ? " (dangling: freed, still mapped)" : "");
}

RowHistory rowHistory(const SessionSnapshot& s, int64_t entry, int64_t layer) {
  RowHistory history;
  if (entry < 0 || entry >= static_cast<int64_t>(s.entries.size())) return history;
  const LedgerEntry& target = s.entries[static_cast<size_t>(entry)];
  history.entry = entry;
  history.cache = target.cache;
  history.layer = layer;
  const RoundStream stream = [&s](int64_t round) { return streamOfRound(s.sequence, s.prompt_length, s.rounds, round); };
  // With a root cause found, the later operations say they follow from it.
  const RootCause* cause = s.diff && s.diff->root_cause ? &*s.diff->root_cause : nullptr;
  history.events = kvscope::rowHistory(s.entries, s.events, entry, layer, stream, cause);
  history.attention = attentionOf(s, target, entry, layer);
  history.blocks = blocksOf(s, target, history.events);
  return history;
}

}  // namespace kvscope::ui
