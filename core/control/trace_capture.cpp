#include "core/control/trace_capture.h"

#include <set>

namespace kvscope {
namespace {

nlohmann::json describedInfo(const Session& session, nlohmann::json info) {
  info["options"] = sessionOptionsJson(session.options());
  info["target"]["architecture"] = session.target().config().architecture_name;
  info["target"]["layers"] = session.target().config().num_layers;
  info["drafter"]["description"] = session.drafter() ? session.drafter()->describe() : "none";
  info["finished"] = session.finished();
  return info;
}

// The display text of every id the record holds.
void addTokenText(const SessionRecord& record, const Tokenizer& tokenizer, std::map<int64_t, std::string>& text) {
  std::set<int64_t> ids(record.sequence.begin(), record.sequence.end());
  for (const RoundRecord& r : record.rounds) ids.insert(r.drafts.begin(), r.drafts.end());
  for (const LedgerEntry& e : record.ledger.entries()) ids.insert(e.token);
  for (int64_t id : ids) {
    if (id >= 0 && id < tokenizer.vocabSize() && text.count(id) == 0) text[id] = tokenizer.tokenText(id);
  }
}

}  // namespace

TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, nlohmann::json info) {
  TraceData t;
  t.info = describedInfo(session, std::move(info));
  t.record = session.record();
  if (tokenizer) addTokenText(t.record, *tokenizer, t.token_text);
  return t;
}

TraceData captureTrace(const BatchSession& batch, const Tokenizer* tokenizer, nlohmann::json info) {
  TraceData t;
  t.info = describedInfo(batch.sequence(0), std::move(info));
  t.info["batch"] = batch.size();
  t.info["finished"] = batch.finished();
  t.record = batch.sequence(0).record();
  for (size_t i = 1; i < batch.size(); ++i) t.more_sequences.push_back(batch.sequence(i).record());
  if (tokenizer) {
    for (int64_t i = 0; i < t.sequences(); ++i) addTokenText(t.sequence(i), *tokenizer, t.token_text);
  }
  return t;
}

}  // namespace kvscope
