#pragma once
// A round as the person reading it counts: kvscope's own sessions count
// rounds ("round 6"); another engine's capture has no rounds of its own, only
// the calls it made, so its rounds (inferred, one per target call) are named
// by the target call that closes them ("target call 6").
#include <QString>
#include <cstdint>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

// "round 6", or on a capture "target call 6" (the prefill: "target call 0");
// "round 6" when the capture's events name no target call for it.
QString roundName(const SessionSnapshot* snapshot, int64_t round);

}  // namespace kvscope::ui
