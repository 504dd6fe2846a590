#include "core/audit/batch_diff.h"

#include <tuple>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

bool happenedBefore(const RootCause& a, const RootCause& b) {
  const auto key = [](const RootCause& c) {
    return std::make_tuple(c.round, phaseOrder(c.phase), c.cache == CacheRole::Target ? 0 : 1, c.sequence);
  };
  return key(a) < key(b);
}

bool BatchDiffReport::failed() const {
  for (const DiffReport& r : sequences) {
    if (r.failed()) return true;
  }
  return false;
}

std::string BatchDiffReport::explanation() const {
  if (first_broken) {
    return "sequence " + std::to_string(*first_broken) + " of " + std::to_string(sequences.size()) + ": " +
           sequences[*first_broken].explanation();
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i].failed()) return "sequence " + std::to_string(i) + ": " + sequences[i].explanation();
  }
  return "all " + std::to_string(sequences.size()) + " sequences: " +
         (sequences.empty() ? std::string() : sequences.front().explanation());
}

BatchDiffReport diffBatchLockstep(BatchSession& batch, const DiffTolerances& tol, const std::atomic<bool>* cancel,
                                  const TokenText& text) {
  require(batch.sequence(0).options().use_cache, "lockstep diff: the batch under test must use the KV cache");
  c10::InferenceMode guard;
  BatchDiffReport report;
  report.sequences.resize(batch.size());
  for (DiffReport& r : report.sequences) r.mode = "lockstep";
  while (!batch.finished() && !(cancel && cancel->load())) {
    // What each unfinished sequence is about to run (a sequence that failed a
    // phase may lag the others).
    std::vector<std::optional<Moment>> next(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const Session& s = batch.sequence(i);
      if (!s.finished()) next[i] = Moment{s.currentRound(), s.nextPhase()};
    }
    batch.stepPhase();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (next[i]) compareLockstepPhase(report.sequences[i], batch.sequence(i), next[i]->phase, next[i]->round, tol);
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    concludeLockstep(report.sequences[i], batch.sequence(i), text);
    const auto& cause = report.sequences[i].root_cause;
    if (cause && (!report.first_broken || happenedBefore(*cause, *report.rootCause()))) report.first_broken = i;
  }
  return report;
}

}  // namespace kvscope
