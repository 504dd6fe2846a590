#pragma once
// The one global cursor every panel follows: a point in the recorded session
// (after `phase` of `round`) and an optional selected sequence position.
#include <cstdint>

#include "core/trace/trace_types.h"

namespace kvscope::ui {

struct Cursor {
  int64_t round = -1;  // -1: nothing recorded yet; 0: the prefill
  Phase phase = Phase::Prefill;
  int64_t position = -1;  // selected sequence position, -1: none

  bool valid() const { return round >= 0; }
  bool operator==(const Cursor& other) const {
    return round == other.round && phase == other.phase && position == other.position;
  }
  bool operator!=(const Cursor& other) const { return !(*this == other); }
};

}  // namespace kvscope::ui
