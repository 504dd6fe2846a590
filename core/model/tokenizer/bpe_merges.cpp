#include "core/model/tokenizer/bpe_merges.h"

#include <queue>

namespace kvscope {

uint64_t MergeTable::key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

void MergeTable::add(int64_t left, int64_t right, MergeRule rule) {
  rules_.insert_or_assign(key(left, right), rule);
}

const MergeRule* MergeTable::find(int64_t left, int64_t right) const {
  const auto it = rules_.find(key(left, right));
  return it == rules_.end() ? nullptr : &it->second;
}

namespace {

// A doubly linked list over the symbols, so merging is O(1) per step.
struct Symbol {
  int64_t id;
  int prev;
  int next;  // -1 at the ends
  bool alive;
};

// A candidate merge of symbols[pos] with its right neighbour.
struct Candidate {
  int rank;
  int pos;
  int64_t new_id;
};

// Orders the heap so the top is the lowest rank, then the leftmost.
struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

using CandidateQueue = std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate>;

void pushPair(const std::vector<Symbol>& symbols, int pos, const MergeTable& table,
              CandidateQueue& queue) {
  const Symbol& left = symbols[pos];
  if (left.next < 0) return;
  if (const MergeRule* rule = table.find(left.id, symbols[left.next].id)) {
    queue.push({rule->rank, pos, rule->new_id});
  }
}

}  // namespace

std::vector<int64_t> applyMerges(const std::vector<int64_t>& ids, const MergeTable& table) {
  const int n = static_cast<int>(ids.size());
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) symbols[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  CandidateQueue queue;
  for (int i = 0; i + 1 < n; ++i) pushPair(symbols, i, table, queue);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    // The pair may have changed since this candidate was queued.
    const MergeRule* rule = table.find(left.id, symbols[left.next].id);
    if (!rule || rule->new_id != top.new_id) continue;

    Symbol& right = symbols[left.next];
    right.alive = false;
    left.id = top.new_id;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) pushPair(symbols, left.prev, table, queue);
    pushPair(symbols, top.pos, table, queue);
  }

  std::vector<int64_t> merged;
  for (const Symbol& s : symbols) {
    if (s.alive) merged.push_back(s.id);
  }
  return merged;
}

}  // namespace kvscope
