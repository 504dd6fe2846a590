#pragma once
// Prints a session's text with each token's origin shown: colours on a
// terminal (accepted draft green, correction yellow, bonus cyan, rejected
// drafts struck through in red), bracket marks otherwise.
#include <ostream>

#include "core/decode/session.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope::cli {

void printColouredRounds(std::ostream& out, const Session& session, const Tokenizer& tokenizer, bool colour);
void printMetrics(std::ostream& out, const Metrics& metrics);

}  // namespace kvscope::cli
