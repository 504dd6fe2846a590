#include "core/check/shard_check.h"

#include <algorithm>

#include "core/capture/capture_shard.h"
#include "core/error.h"

namespace kvscope {
namespace {

using Files = std::vector<std::shared_ptr<const CaptureFile>>;

[[noreturn]] void refuse(const CaptureFile& file, const std::string& problem) {
  throw Error(file.path() + ": " + problem);
}

const CaptureShard& shardOf(const CaptureFile& file) {
  if (!file.manifest().shard)
    refuse(file, "not a rank's capture (no shard in the manifest): several files are checked together only as the "
                 "ranks of one tensor-parallel run (docs/engine-captures.md)");
  return *file.manifest().shard;
}

// The part of a call every rank must have recorded the same.
bool sameCall(const CaptureCall& a, const CaptureCall& b) {
  return a.role == b.role && a.index == b.index && a.batch_input_ids == b.batch_input_ids &&
         a.batch_positions == b.batch_positions;
}

void requireSameRun(const CaptureFile& first, const CaptureFile& other) {
  const CaptureManifest& a = first.manifest();
  const CaptureManifest& b = other.manifest();
  // Every message ends the same way: what differs, then whose file it differs from.
  const auto differs = [&](const std::string& what) {
    refuse(other, what + " than rank 0's " + first.path() + ": not a rank of the same run");
  };
  if (a.batch != b.batch) differs("another batch (" + std::to_string(b.batch) + " sequences, not " + std::to_string(a.batch) + ")");
  for (int r = 0; r < kCaptureRoles; ++r) {
    const auto& ma = a.models[r];
    const auto& mb = b.models[r];
    if (ma.has_value() != mb.has_value()) differs("other roles");
    if (ma && (ma->layers != mb->layers || ma->config.num_key_value_heads != mb->config.num_key_value_heads ||
               ma->config.model_type != mb->config.model_type))
      differs(std::string("another ") + captureRoleName(static_cast<CaptureRole>(r)) + " model (layers, KV heads or model type)");
  }
  if (a.calls.size() != b.calls.size())
    differs("other calls (" + std::to_string(b.calls.size()) + ", not " + std::to_string(a.calls.size()) + ")");
  for (size_t c = 0; c < a.calls.size(); ++c) {
    if (!sameCall(a.calls[c], b.calls[c]))
      differs("other calls (call " + std::to_string(c) + ", " + captureRoleName(b.calls[c].role) + " " +
              std::to_string(b.calls[c].index) + ", has other inputs or positions)");
  }
  if (a.batch_committed != b.batch_committed) differs("other committed tokens");
}

// Each role's ranges, in rank order, must tile [0, num_key_value_heads).
void requireHeadsTiled(const Files& files) {
  const CaptureManifest& first = files.front()->manifest();
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (!first.models[r]) continue;
    const auto i = static_cast<size_t>(r);
    int64_t next = 0;
    for (const auto& file : files) {
      const CaptureShard& s = *file->manifest().shard;
      if (s.kv_head_first[i] != next)
        refuse(*file, std::string("rank ") + std::to_string(s.rank) + " holds " + captureRoleName(static_cast<CaptureRole>(r)) +
                          " KV heads from " + std::to_string(s.kv_head_first[i]) + " where the ranks before it end at " +
                          std::to_string(next) + " (the ranks' heads must tile the model's)");
      next += s.kv_head_count[i];
    }
    const auto whole = first.models[r]->config.num_key_value_heads;
    if (whole && next != *whole)
      refuse(*files.back(), "the ranks hold " + std::to_string(next) + " of the " + captureRoleName(static_cast<CaptureRole>(r)) +
                                "'s " + std::to_string(*whole) + " KV heads");
  }
}

std::string rankNamed(int64_t rank, const std::string& what) { return "rank " + std::to_string(rank) + ": " + what; }

}  // namespace

namespace {

std::string ranksWhere(const std::vector<RankVerdict>& ranks, bool following) {
  std::string out;
  for (const RankVerdict& v : ranks) {
    if (!v.ok() && v.follows_root_cause == following) out += (out.empty() ? "" : ", ") + std::to_string(v.rank);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::string ShardCheck::brokenRanks() const { return ranksWhere(ranks, false); }

std::string ShardCheck::followingRanks() const { return ranksWhere(ranks, true); }

Files orderedRanks(Files files) {
  if (files.empty()) throw Error("no capture to check");
  const int64_t ranks = shardOf(*files.front()).ranks;
  Files by_rank(static_cast<size_t>(ranks));
  for (const auto& file : files) {
    const CaptureShard& s = shardOf(*file);
    if (s.ranks != ranks)
      refuse(*file, "rank " + std::to_string(s.rank) + " of " + std::to_string(s.ranks) + ", but " + files.front()->path() +
                        " is of a run of " + std::to_string(ranks) + " ranks");
    auto& slot = by_rank[static_cast<size_t>(s.rank)];
    if (slot) refuse(*file, "rank " + std::to_string(s.rank) + " again (" + slot->path() + " is rank " + std::to_string(s.rank) + " too)");
    slot = file;
  }
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (!by_rank[r])
      throw Error("rank " + std::to_string(r) + " of " + std::to_string(ranks) + " is missing: pass every rank's capture");
  }
  for (size_t r = 1; r < by_rank.size(); ++r) requireSameRun(*by_rank.front(), *by_rank[r]);
  requireHeadsTiled(by_rank);
  return by_rank;
}

ShardCheck checkEveryRank(const Files& files, const CaptureCheckOptions& options, const TokenText& text, int64_t show) {
  if (show >= static_cast<int64_t>(files.size()))
    throw Error("no rank " + std::to_string(show) + " (the run has " + std::to_string(files.size()) + " ranks)");
  ShardCheck out;
  std::optional<RunTime> first_breach, first_divergence;
  std::vector<SequenceCheck> checks;
  for (size_t r = 0; r < files.size(); ++r) {
    const auto rank = static_cast<int64_t>(r);
    SequenceCheck check = checkEverySequence(*files[r], options, text);
    RankVerdict verdict{rank, check.report.root_cause};
    if (verdict.root_cause) verdict.root_cause->what = rankNamed(rank, verdict.root_cause->what);
    // Ties go to the lower rank: the ranks ran the same calls at the same time.
    if (check.root_cause_time && (!first_breach || *check.root_cause_time < *first_breach)) {
      first_breach = check.root_cause_time;
      out.root_cause_rank = rank;
    }
    // The logits are the run's, the same on every rank: one rank's symptom is every rank's.
    if (check.divergence_time && (!first_divergence || *check.divergence_time < *first_divergence)) {
      first_divergence = check.divergence_time;
      out.first_divergence = check.report.first_divergence;
    }
    out.ranks.push_back(std::move(verdict));
    checks.push_back(std::move(check));
  }
  const int64_t cause_rank = out.root_cause_rank.value_or(0);
  out.shown_rank = show >= 0 ? show : cause_rank;
  for (size_t r = 0; r < checks.size(); ++r) {
    out.ranks[r].follows_root_cause = out.ranks[r].root_cause && static_cast<int64_t>(r) != cause_rank;
  }
  const bool shows_cause = out.shown_rank == cause_rank;
  out.run = std::move(checks[static_cast<size_t>(out.shown_rank)]);
  CaptureCheckReport& run = out.run.report;
  // Another rank than the root cause's: its own breach (if any), which its timeline holds.
  run.root_cause = out.ranks[static_cast<size_t>(shows_cause ? cause_rank : out.shown_rank)].root_cause;
  if (shows_cause && !out.root_cause_rank) run.root_cause = std::nullopt;
  run.first_divergence = out.first_divergence;
  if (shows_cause) out.run.root_cause_time = first_breach;
  out.run.divergence_time = first_divergence;
  // Rows are each rank's own; the logits are the run's, checked once per
  // rank alike, so the shown rank's count stands for them.
  for (size_t r = 0; r < checks.size(); ++r) {
    if (static_cast<int64_t>(r) == out.shown_rank) continue;
    run.rows_value_checked += checks[r].report.rows_value_checked;
    run.max_value_error = std::max(run.max_value_error, checks[r].report.max_value_error);
    run.committed_inferred = run.committed_inferred || checks[r].report.committed_inferred;
  }
  return out;
}

}  // namespace kvscope
