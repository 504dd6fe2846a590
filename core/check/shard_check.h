#pragma once
// A tensor-parallel run checked as one run: each rank recorded its own
// capture (its KV heads' rows, the run's calls; capture_shard.h), each rank
// is checked as the shard it is (its rows against the reference's heads it
// holds), and the run's root cause is the breach that happened first in the
// engine's run, whichever rank (and sequence) it broke, naming the rank.
// The ranks' files share the call order, so their breaches are placed on
// one clock (sequence_check.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check/sequence_check.h"

namespace kvscope {

// One rank's own verdict: whether its cache kept the contract. (Its
// logits are the run's, the same on every rank: a divergence is the run's.)
struct RankVerdict {
  int64_t rank = 0;
  std::optional<RootCause> root_cause;
  // Its breach came after the run's root cause, in another rank: the ranks
  // sum their activations, so it may follow from it, and is not named as a cause.
  bool follows_root_cause = false;
  bool ok() const { return !root_cause; }
};

struct ShardCheck {
  SequenceCheck run;               // the run's report; the shown rank's view, timeline and record
  std::vector<RankVerdict> ranks;  // by rank
  int64_t shown_rank = 0;          // the rank of the run's root cause (0 when clean), or the one asked for
  std::optional<int64_t> root_cause_rank;
  std::optional<CaptureDivergence> first_divergence;  // the run's

  // The ranks whose cache broke the contract first-hand, as "1" ("none"),
  // and those whose later breach may follow from the root cause ("0").
  std::string brokenRanks() const;
  std::string followingRanks() const;
};

// The files of one run, ordered by rank. Throws Error, naming the files and
// the field, unless every file is a rank's capture (version 3 `shard`), the
// ranks are 0 .. N-1 once each, the files agree on the run (models, batch,
// every call's role, inputs and positions, committed tokens), and each
// role's KV head ranges tile the model's heads.
std::vector<std::shared_ptr<const CaptureFile>> orderedRanks(std::vector<std::shared_ptr<const CaptureFile>> files);

// Checks every rank (every sequence of each) and keeps the timeline of the
// rank and sequence of the run's root cause, or of rank `show` (>= 0; the GUI's
// rank picker), whose report then carries that rank's own root cause, the one
// its timeline can point at. `files` as orderedRanks returns.
ShardCheck checkEveryRank(const std::vector<std::shared_ptr<const CaptureFile>>& files,
                          const CaptureCheckOptions& options, const TokenText& text = {}, int64_t show = -1);

}  // namespace kvscope
