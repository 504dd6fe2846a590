#include "core/control/trace_capture.h"

#include <set>

namespace kvscope {

TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, nlohmann::json info) {
  TraceData t;
  info["options"] = sessionOptionsJson(session.options());
  info["target"]["architecture"] = session.target().config().architecture_name;
  info["target"]["layers"] = session.target().config().num_layers;
  info["drafter"]["description"] = session.drafter() ? session.drafter()->describe() : "none";
  info["finished"] = session.finished();
  t.info = std::move(info);
  t.record = session.record();
  if (tokenizer) {
    std::set<int64_t> ids(t.record.sequence.begin(), t.record.sequence.end());
    for (const RoundRecord& r : t.record.rounds) ids.insert(r.drafts.begin(), r.drafts.end());
    for (const LedgerEntry& e : t.record.ledger.entries()) ids.insert(e.token);
    for (int64_t id : ids) {
      if (id >= 0 && id < tokenizer->vocabSize()) t.token_text[id] = tokenizer->tokenText(id);
    }
  }
  return t;
}

}  // namespace kvscope
