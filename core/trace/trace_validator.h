#pragma once
// The one check every trace read goes through (readTrace runs it; the CLI and
// the GUI read traces only through readTrace). A .kvtrace comes from anyone,
// and every view indexes the record by what it says: rounds, layers, heads,
// queries, keys, rows, ledger entries, token ids. validateTrace checks every
// one of those cross-references, so no view can index out of range or size
// a buffer by a number the file made up.
#include <cstdint>
#include <string>

#include "core/trace/trace_file.h"

namespace kvscope {

// Bounds on what a trace may claim, each far above any real model or session.
constexpr int64_t kMaxTraceLayers = 1024;           // decoder layers of one model
constexpr int64_t kMaxTraceTokenId = int64_t{1} << 20;  // 4x the largest vocabulary in use (262,144)

// Throws Error("<path>: corrupted trace: <what disagrees with what>").
void validateTrace(const TraceData& trace, const std::string& path);

}  // namespace kvscope
