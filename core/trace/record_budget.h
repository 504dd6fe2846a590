#pragma once
// Keeps what a session records for its views (each verify pass's attention,
// masks and logits) within a byte budget. Attention grows with the context
// (layers x heads x queries x keys per round), so a 2,000-token session of a
// 24-layer model would otherwise hold gigabytes. Over budget, the oldest
// rounds lose their attention and masks first, then their logits; the newest
// round keeps everything, and the ledger (every cache row's K/V, which the
// audit, the diff's root cause and the KV views need) is never dropped.
#include <cstdint>
#include <map>

#include "core/trace/session_record.h"

namespace kvscope {

// Bytes of the tensors a verify record holds.
int64_t recordedBytes(const VerifyRecord& record);

class RecordBudget {
 public:
  // budget_bytes <= 0: no limit.
  explicit RecordBudget(int64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Counts `newest` (just added to `records`) and drops from older rounds
  // until the records fit the budget again.
  void admit(std::map<int64_t, VerifyRecord>& records, int64_t newest);

  int64_t budgetBytes() const { return budget_bytes_; }
  int64_t keptBytes() const { return kept_bytes_; }
  int64_t roundsWithoutAttention() const { return attention_dropped_; }
  int64_t roundsWithoutLogits() const { return logits_dropped_; }

 private:
  // Drops one kind of tensor from the oldest rounds before `newest`.
  void dropOldest(std::map<int64_t, VerifyRecord>& records, int64_t newest, bool attention);

  int64_t budget_bytes_;
  int64_t kept_bytes_ = 0;
  int64_t attention_dropped_ = 0;
  int64_t logits_dropped_ = 0;
};

}  // namespace kvscope
