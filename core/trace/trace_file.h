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

#include <nlohmann/json.hpp>

#include "core/trace/session_record.h"

namespace kvscope {

// Version 2: row identity (rotary positions), the cache event log, per-layer
// verify masks. Version 3 adds policy evictions: an Evict event may name its
// policy and the (entry, layer, kv head, score) rows it masked. A version 2
// file is a version 3 file without them and reads as it is; version 1 files
// are refused with a message saying so.
constexpr int kTraceFormatVersion = 3;
constexpr int kOldestTraceFormatVersion = 2;

struct TraceData {
  nlohmann::json info;  // options, model descriptions, the investigation (free-form, versioned by the file)
  SessionRecord record;
  std::map<int64_t, std::string> token_text;  // display text of every id that appears
};

// Atomic (temp file + rename): an existing file is never left half-written.
void writeTrace(const std::string& path, const TraceData& trace);
// Validates everything; throws Error("<path>: <problem>") on a truncated,
// corrupted or foreign file.
TraceData readTrace(const std::string& path);

}  // namespace kvscope
