#include "core/trace/session_record.h"

#include <algorithm>

namespace kvscope {

std::vector<int64_t> SessionRecord::streamOfRound(int64_t round) const {
  return kvscope::streamOfRound(sequence, prompt_length, rounds, round);
}

Moment SessionRecord::lastMoment() const {
  if (rounds.size() <= 1) return {0, Phase::Prefill};
  const RoundRecord& r = rounds.back();
  if (r.next_token < 0) return {r.index, verify.count(r.index) ? Phase::Verify : Phase::Draft};
  // Accept has run; prune too when a later event or the round's end says so.
  return {r.index, r.prune_done ? Phase::Prune : Phase::Accept};
}

}  // namespace kvscope
