#include "ui/context/QueryTokens.h"

namespace kvscope::ui {

std::vector<int64_t> tokensAt(const SessionSnapshot& snapshot, const Moment& moment) {
  const RoundRecord* round = moment.round >= 1 ? snapshot.round(moment.round) : nullptr;
  const bool judged = round && phaseOrder(moment.phase) >= phaseOrder(Phase::Accept) && round->next_token >= 0;
  std::vector<int64_t> ids;
  for (size_t position = 0; position < snapshot.sequence.size(); ++position) {
    const int64_t emitted = snapshot.emitted_round[position];
    // Tokens of later rounds, and this round's before its verdict, do not exist yet.
    if (emitted > moment.round || (emitted == moment.round && !judged && emitted > 0)) break;
    ids.push_back(snapshot.sequence[position]);
  }
  if (round && !judged) ids.insert(ids.end(), round->drafts.begin(), round->drafts.end());
  return ids;
}

}  // namespace kvscope::ui
