#pragma once
// The token stream as it stood at a recorded moment: what the explanation of
// a query at that moment runs over (the tokens of positions 0..P).
#include <cstdint>
#include <vector>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

// The sequence emitted up to `moment`, then the moment round's drafts while
// they are not judged yet (the same stream the token strip shows, without
// the struck-through rejected drafts).
std::vector<int64_t> tokensAt(const SessionSnapshot& snapshot, const Moment& moment);

}  // namespace kvscope::ui
