#pragma once
// A recorded session (.kvtrace): everything the GUI and the diff need, with no
// model loaded. On disk it is a plain safetensors file: K/V rows of the
// ledger and the verify logits / attention are tensors, and the
// "__metadata__" key "kvscope" holds the versioned JSON of the session,
// rounds and ledger. Any safetensors reader can open it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/decode/session.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/trace/kv_ledger.h"
#include "core/trace/trace_types.h"

namespace kvscope {

constexpr int kTraceFormatVersion = 1;

struct TraceData {
  nlohmann::json info;  // options, model descriptions (free-form, versioned by the file)
  std::vector<int64_t> sequence;
  std::vector<TokenOrigin> origins;
  int64_t prompt_length = 0;
  std::vector<RoundRecord> rounds;  // [0] is the prefill
  std::map<int64_t, VerifyRecord> verify;
  KvLedger ledger;
  std::map<int64_t, std::string> token_text;  // display text of every id that appears
};

// Copies a session's record. `tokenizer` supplies the token texts (may be null).
TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, nlohmann::json info = {});

// Atomic (temp file + rename): an existing file is never left half-written.
void writeTrace(const std::string& path, const TraceData& trace);
// Validates everything; throws Error("<path>: <problem>") on a truncated,
// corrupted or foreign file.
TraceData readTrace(const std::string& path);

}  // namespace kvscope
