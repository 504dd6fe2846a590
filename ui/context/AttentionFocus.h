#pragma once
// The cache rows one explained query reads (the Attention Step by Step
// panel's query), for the views that mark them: the key rows of positions
// 0..P at layer L and kv head G of the target cache, the query's own row,
// and the rows ticked in the what-if box. Plain data: the panel that explains
// fills it from the core's explanation; the KV view only looks positions up
// in its own rows.
#include <cstdint>
#include <vector>

namespace kvscope::ui {

struct AttentionFocus {
  bool active = false;
  int64_t layer = 0;
  int64_t kv_head = 0;
  int64_t query_position = -1;         // the query's own row (written by its forward)
  std::vector<int64_t> key_positions;  // every position the query reads (0..P), in order
  std::vector<int64_t> ticked_positions;  // rows ticked to remove or zero in the what-if box

  bool operator==(const AttentionFocus& o) const {
    return active == o.active && layer == o.layer && kv_head == o.kv_head && query_position == o.query_position &&
           key_positions == o.key_positions && ticked_positions == o.ticked_positions;
  }
  bool operator!=(const AttentionFocus& o) const { return !(*this == o); }
};

}  // namespace kvscope::ui
