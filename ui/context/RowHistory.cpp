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

}  // namespace

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
  return history;
}

}  // namespace kvscope::ui
