#pragma once
// kvscope-cli run --drafter-compressed POLICY:BUDGET[:...]: the target drafts
// for itself over a compressed copy of its cache and verifies over the full
// cache (core/compress/self_speculation.h), instead of a Session with a second
// model. Greedy only; the output is the target's greedy output. The spec is
// --evict's (core/decode/session_eviction.h) without every=N: the drafting
// cache is compressed once, after the prefill.
#include "app/cli/args.h"

namespace kvscope::cli {

// Runs `run --drafter-compressed ...`: prints the text, alpha, tokens per
// second and the measured speedup over plain greedy decoding, then the JSON
// line. Throws Error for options it cannot honour (sampling, a second
// drafter, traces, faults, ...), naming them.
int runCompressedDrafting(Args& args);

}  // namespace kvscope::cli
