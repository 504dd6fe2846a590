#pragma once
// What a captured verify call attended to. An engine's capture holds the K/V
// rows it kept, not its attention weights; kvscope recomputes them: its
// reference forward of the call's inputs, at the positions the engine gave
// them, over exactly the rows the engine's cache held before the call (so a
// stale row gets the weight the engine gave it, if the engine's own
// attention kernel is right). Verify Attention then reads a capture's rounds
// as it reads a session's.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/check/capture_timeline.h"
#include "core/model/causal_lm.h"

namespace kvscope {

struct CaptureAttention {
  std::map<int64_t, VerifyRecord> verify;  // by round (the target call's index)
  std::vector<std::string> notes;          // rounds left out, and why
};

// One replay per target call after the first, keyed by its round. Calls of
// a fixed-size (static or ring) cache, and calls that did not keep a row
// for each input, are left out with a note: their keys are not the rows the
// views label.
CaptureAttention replayVerifyAttention(const CaptureFile& file, const CaptureTimeline& timeline, const CausalLM& target);

}  // namespace kvscope
