#pragma once
// A cache row's history, like a graphics debugger's pixel history: every
// cache operation that touched one ledger entry in one layer (the append that
// wrote it, each crop, reset or eviction that kept or removed it, appends
// that wrote another row for its position), what the entry's physical row
// and verdict were after each, what a fault did there, and the attention the
// row received in each verify pass. Walks snapshot.events itself: the core's
// eventsTouchingEntry needs a torch SessionRecord, the GUI has a snapshot.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/inspect/snapshot.h"

namespace kvscope::ui {

enum class RowEffect {
  Born,       // the append that wrote it
  Kept,       // a crop / reset / eviction that left it in place
  Moved,      // an operation after which it sits in another physical row
  Removed,    // the operation that removed it from this layer
  Rivalled,   // an append that wrote another row for its position
  Masked,     // an eviction policy masked it in some kv heads (it stays in its row)
};
const char* rowEffectName(RowEffect effect);

struct RowEvent {
  int64_t event_index = 0;  // into snapshot.events.events()
  int64_t round = 0;
  Phase phase = Phase::Prefill;
  CacheEventKind kind = CacheEventKind::Append;
  RowEffect effect = RowEffect::Born;
  int64_t row_after = -1;            // the entry's physical row after the event (-1: removed)
  RowState state = RowState::Ok;     // its verdict after the event
  int64_t expected_rows = 0;
  std::string operation;             // the event in one line (describeCacheEvent)
  std::string fault_action;
  // Masked: the policy, and the kv heads of this layer that stopped reading
  // the row, with the policy's score of it in each.
  std::string policy;
  std::vector<int64_t> kv_heads;
  std::vector<double> scores;
};

struct RowAttention {
  int64_t round = 0;
  std::vector<float> per_head;  // attention received, summed over the verify queries, per query head
};

struct RowHistory {
  int64_t entry = -1;
  CacheRole cache = CacheRole::Target;
  int64_t layer = 0;
  std::vector<RowEvent> events;
  std::vector<RowAttention> attention;  // target rows only: per verify round it was a key of
};

RowHistory rowHistory(const SessionSnapshot& snapshot, int64_t entry, int64_t layer);
// "round 1 prune (crop): target 15 -> 11 rows, 10 required; removed 3 (rejected draft); fault: ..."
std::string describeCacheEvent(const CacheEvent& event);

}  // namespace kvscope::ui
