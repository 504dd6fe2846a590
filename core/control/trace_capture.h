#pragma once
// Copies a live session's record (or a batch's records) into a TraceData for
// a .kvtrace file.
#include <nlohmann/json.hpp>

#include "core/decode/batch_session.h"
#include "core/decode/session.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/trace/trace_file.h"

namespace kvscope {

// `tokenizer` supplies the token texts (may be null); `info` is kept as given,
// with the options and model descriptions added.
TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, nlohmann::json info = {});
// A batch: every sequence's record (sequence 0's options and models describe
// them all; info["batch"] is the number of sequences).
TraceData captureTrace(const BatchSession& batch, const Tokenizer* tokenizer, nlohmann::json info = {});

}  // namespace kvscope
