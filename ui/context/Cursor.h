#pragma once
// The one global cursor every panel follows: a moment of the recorded session
// (after `phase` of `round`) and one selection inside it: a sequence
// position, a cache row (by identity: the ledger entry, and the physical row
// it occupies at the moment), the layer and the kv head. Panels never keep
// their own copy of any of these; they read and write this one.
#include <cstdint>

#include "core/trace/trace_types.h"

namespace kvscope::ui {

struct Cursor {
  int64_t round = -1;  // -1: nothing recorded yet; 0: the prefill
  Phase phase = Phase::Prefill;
  int64_t position = -1;  // selected sequence position, -1: none
  CacheRole cache = CacheRole::Target;  // the cache `row`, `entry`, `layer` and `head` refer to
  int64_t layer = 0;
  int64_t head = 0;    // kv head
  // The selected row. The entry is its identity and survives cursor moves;
  // the physical row is where that entry sits in `layer` at the moment (-1
  // when not held then). A missing row has no entry, only the slot it belongs in.
  int64_t row = -1;
  int64_t entry = -1;

  bool valid() const { return round >= 0; }
  Moment moment() const { return {round, phase}; }
  bool operator==(const Cursor& o) const {
    return round == o.round && phase == o.phase && position == o.position && cache == o.cache && layer == o.layer &&
           head == o.head && row == o.row && entry == o.entry;
  }
  bool operator!=(const Cursor& other) const { return !(*this == other); }
};

}  // namespace kvscope::ui
