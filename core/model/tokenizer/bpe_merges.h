#pragma once
// The BPE merge table and the merge loop: repeatedly merge the adjacent
// pair with the lowest rank (the leftmost one on ties), exactly as Hugging
// Face's BPE model does, until no adjacent pair has a merge rule.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvscope {

struct MergeRule {
  int rank;        // position in the merges list; lower merges first
  int64_t new_id;  // id of the concatenated token
};

class MergeTable {
 public:
  // A later rule for the same pair replaces the earlier one (as in HF).
  void add(int64_t left, int64_t right, MergeRule rule);
  const MergeRule* find(int64_t left, int64_t right) const;
  size_t size() const { return rules_.size(); }

 private:
  static uint64_t key(int64_t left, int64_t right);
  std::unordered_map<uint64_t, MergeRule> rules_;
};

// Merges a word's initial symbols (one id per character or byte).
std::vector<int64_t> applyMerges(const std::vector<int64_t>& symbols, const MergeTable& table);

}  // namespace kvscope
