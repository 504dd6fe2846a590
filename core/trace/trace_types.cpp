#include "core/trace/trace_types.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {


const char* tokenOriginName(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::Prompt: return "prompt";
    case TokenOrigin::AcceptedDraft: return "accepted";
    case TokenOrigin::Correction: return "correction";
    case TokenOrigin::Bonus: return "bonus";
  }
  return "?";
}

const char* bookkeepingName(Bookkeeping bookkeeping) {
  return bookkeeping == Bookkeeping::Exact ? "exact" : "seed";
}

Bookkeeping parseBookkeeping(const std::string& name) {
  if (name == "exact") return Bookkeeping::Exact;
  if (name == "seed") return Bookkeeping::Seed;
  throw Error("unknown bookkeeping '" + name + "' (expected exact or seed)");
}



std::vector<int64_t> streamOfRound(const std::vector<int64_t>& sequence, int64_t prompt_length,
                                   const std::vector<RoundRecord>& rounds, int64_t round) {
  const auto size = static_cast<int64_t>(sequence.size());
  if (round <= 0 || round >= static_cast<int64_t>(rounds.size())) {
    const int64_t length = std::clamp<int64_t>(round <= 0 ? prompt_length : size, 0, size);
    return std::vector<int64_t>(sequence.begin(), sequence.begin() + length);
  }
  const RoundRecord& r = rounds[static_cast<size_t>(round)];
  const int64_t start = std::clamp<int64_t>(r.start_length, 0, size);
  std::vector<int64_t> stream(sequence.begin(), sequence.begin() + start);
  stream.insert(stream.end(), r.drafts.begin(), r.drafts.end());
  return stream;
}

}  // namespace kvscope
