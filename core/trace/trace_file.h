#pragma once
// A recorded session (.kvtrace): everything the GUI, the diff and the audit
// need, with no model loaded. On disk it is a plain safetensors file: K/V rows
// of the ledger and the verify logits / attention / masks are tensors, and the
// "__metadata__" key "kvscope" holds the versioned JSON of the session record
// (rounds, ledger, cache events) and of the investigation (fault, diff, root
// cause, cursor) under "info". Any safetensors reader can open it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace/session_record.h"

namespace kvscope {

// Version 2: row identity (rotary positions), the cache event log, per-layer
// verify masks. Version 3 adds policy evictions: an Evict event may name its
// policy and the (entry, layer, kv head, score) rows it masked. Version 4
// adds batches: the records of a batch's sequences after the first (each
// with its tensors under "sequence.I."). A version 2 or 3 file is a version
// 4 file without them and reads as it is; version 1 files are refused with
// a message saying so. docs/trace-format.md describes the layout.
constexpr int kTraceFormatVersion = 4;
constexpr int kOldestTraceFormatVersion = 2;
// A batch trace's sequences, at most (as a batch session's).
constexpr int64_t kMaxTraceSequences = 64;

struct TraceData {
  nlohmann::json info;  // options, model descriptions, the investigation (free-form, versioned by the file)
  SessionRecord record;  // one sequence, or a batch's sequence 0
  // A batch (core/decode/batch_session.h): sequences 1, 2, ... in batch order.
  std::vector<SessionRecord> more_sequences;
  std::map<int64_t, std::string> token_text;  // display text of every id that appears (every sequence's)

  int64_t sequences() const { return 1 + static_cast<int64_t>(more_sequences.size()); }
  const SessionRecord& sequence(int64_t i) const {
    return i == 0 ? record : more_sequences.at(static_cast<size_t>(i - 1));
  }
};

// Atomic (temp file + rename): an existing file is never left half-written.
void writeTrace(const std::string& path, const TraceData& trace);
// Validates everything; throws Error("<path>: <problem>") on a truncated,
// corrupted or foreign file.
TraceData readTrace(const std::string& path);

}  // namespace kvscope
