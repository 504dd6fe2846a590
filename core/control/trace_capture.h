#pragma once
// Copies a live session's record into a TraceData for a .kvtrace file.
#include <nlohmann/json.hpp>

#include "core/decode/session.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/trace/trace_file.h"

namespace kvscope {

// `tokenizer` supplies the token texts (may be null); `info` is kept as given,
// with the options and model descriptions added.
TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, nlohmann::json info = {});

}  // namespace kvscope
