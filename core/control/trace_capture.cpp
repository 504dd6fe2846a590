#include "core/control/trace_capture.h"

#include <set>

namespace kvscope {

TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, nlohmann::json info) {
  TraceData t;
  const SessionOptions& o = session.options();
  info["options"] = {{"gamma", o.gamma},           {"adaptive_gamma", o.adaptive_gamma},
                     {"max_new_tokens", o.max_new_tokens}, {"use_cache", o.use_cache},
                     {"sampling", o.sampling.describe()}, {"seed", o.seed},
                     {"bookkeeping", bookkeepingName(o.bookkeeping)}, {"ignore_eos", o.ignore_eos},
                     {"fault", faultInfo(o.fault).name},
                     {"eviction", o.eviction ? o.eviction->describe() : "none"}};
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
