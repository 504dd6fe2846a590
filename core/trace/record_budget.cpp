#include "core/trace/record_budget.h"

#include <ATen/core/Tensor.h>

namespace kvscope {
namespace {

int64_t bytesOf(const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

int64_t attentionBytes(const VerifyRecord& record) {
  int64_t total = 0;
  for (const at::Tensor& t : record.attention) total += bytesOf(t);
  for (const at::Tensor& t : record.masks) total += bytesOf(t);
  return total;
}

}  // namespace

int64_t recordedBytes(const VerifyRecord& record) { return attentionBytes(record) + bytesOf(record.logits); }

void RecordBudget::admit(std::map<int64_t, VerifyRecord>& records, int64_t newest) {
  const auto found = records.find(newest);
  if (found != records.end()) kept_bytes_ += recordedBytes(found->second);
  if (budget_bytes_ <= 0) return;
  // Attention is the bulk and the least needed once a round is behind you;
  // logits feed the cached-vs-uncached diff, so they go last.
  if (kept_bytes_ > budget_bytes_) dropOldest(records, newest, /*attention=*/true);
  if (kept_bytes_ > budget_bytes_) dropOldest(records, newest, /*attention=*/false);
}

void RecordBudget::dropOldest(std::map<int64_t, VerifyRecord>& records, int64_t newest, bool attention) {
  for (auto& [round, record] : records) {
    if (kept_bytes_ <= budget_bytes_ || round >= newest) return;
    if (attention && !record.attention.empty()) {
      kept_bytes_ -= attentionBytes(record);
      record.attention.clear();
      record.masks.clear();
      record.attention_dropped = true;
      ++attention_dropped_;
    } else if (!attention && record.logits.defined()) {
      kept_bytes_ -= bytesOf(record.logits);
      record.logits = at::Tensor();
      record.logits_dropped = true;
      ++logits_dropped_;
    }
  }
}

}  // namespace kvscope
