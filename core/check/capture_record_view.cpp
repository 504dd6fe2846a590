#include "core/check/capture_record_view.h"

#include <algorithm>
#include <numeric>

namespace kvscope {
namespace {

int64_t size(const std::vector<int64_t>& v) { return static_cast<int64_t>(v.size()); }

bool momentBefore(const Moment& a, const Moment& b) { return !atOrBefore(b, a); }

// Where each step is shown. A forward sits in its phase of its round (the
// target's first call is the prefill; a drafter call before the target's
// first is part of it); a change between calls that opens a role's round is
// the previous round's prune, one inside the drafting stays in the drafting.
std::vector<Moment> stepMoments(const CaptureTimeline& timeline) {
  std::vector<Moment> moments;
  std::vector<int64_t> drafter_rounds_seen;  // rounds the drafter has had a step in
  for (const CaptureStep& step : timeline.steps) {
    const int64_t round = step.round;
    const bool forward = step.operation == CaptureOperation::Forward;
    Moment m{round, Phase::Draft};
    if (round == 0) {
      m = {0, Phase::Prefill};
    } else if (step.role == CaptureRole::Target) {
      m = forward ? Moment{round, Phase::Verify} : Moment{round - 1, Phase::Prune};
    } else if (!forward && std::find(drafter_rounds_seen.begin(), drafter_rounds_seen.end(), round) == drafter_rounds_seen.end()) {
      m = {round - 1, Phase::Prune};
    }
    if (step.role == CaptureRole::Drafter) drafter_rounds_seen.push_back(round);
    moments.push_back(m);
  }
  return moments;
}

int64_t commonPrefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const auto n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

// Round k >= 1 from target call k: the committed tokens before it plus the
// one it feeds first, its drafts (the rest of its stream), and what the
// frontier's move says was accepted.
RoundRecord inferredRound(const CaptureTimeline& timeline, int64_t k) {
  const std::vector<int64_t>& committed = timeline.record.sequence;
  const std::vector<int64_t>& stream = timeline.streams[static_cast<size_t>(k)];
  RoundRecord r;
  r.index = k;
  r.start_length = std::min({timeline.frontiers[static_cast<size_t>(k)] + 1, size(committed), commonPrefix(stream, committed)});
  r.drafts.assign(stream.begin() + r.start_length, stream.end());
  r.gamma = size(r.drafts);
  const int64_t moved = timeline.frontiers[static_cast<size_t>(k) + 1] - timeline.frontiers[static_cast<size_t>(k)];
  r.accepted = std::clamp<int64_t>(moved - 1, 0, r.gamma);
  const int64_t end = std::min(r.start_length + r.accepted + 1, size(committed));
  r.emitted.assign(committed.begin() + r.start_length, committed.begin() + std::max(end, r.start_length));
  r.accepted = std::min(r.accepted, size(r.emitted));
  if (size(r.emitted) > r.accepted) {
    r.next_token = r.emitted.back();
    r.bonus = r.gamma > 0 && r.accepted == r.gamma;  // with no drafts the target's pick corrects nothing either
  }
  r.prune_done = true;
  return r;
}

void inferRounds(const CaptureTimeline& timeline, SessionRecord& record) {
  const int64_t target_calls = size(timeline.frontiers) - 1;
  const int64_t committed = size(record.sequence);
  // Decided before round 1: the prompt and the token the prefill chose.
  record.prompt_length = target_calls > 1 ? std::min(timeline.frontiers[1] + 1, committed) : committed;
  RoundRecord prefill;
  prefill.start_length = record.prompt_length;
  prefill.prune_done = true;
  record.rounds.push_back(prefill);
  for (int64_t k = 1; k < target_calls; ++k) record.rounds.push_back(inferredRound(timeline, k));
  // Drafter calls after the target's last: a round that drafted and never verified.
  const bool drafted_after = std::any_of(timeline.steps.begin(), timeline.steps.end(),
                                         [&](const CaptureStep& s) { return s.round == target_calls && target_calls > 0; });
  if (drafted_after) {
    RoundRecord open;
    open.index = target_calls;
    open.start_length = committed;
    record.rounds.push_back(open);
  }
  for (RoundRecord& r : record.rounds) {
    for (const CaptureStep& s : timeline.steps) {
      if (s.round != r.index || s.operation != CaptureOperation::Forward) continue;
      ++(s.role == CaptureRole::Target ? r.target_forwards : r.drafter_forwards);
    }
  }
  record.origins.assign(record.sequence.size(), TokenOrigin::Correction);
  std::fill_n(record.origins.begin(), record.prompt_length, TokenOrigin::Prompt);
  for (const RoundRecord& r : record.rounds) {
    for (int64_t i = 0; i < size(r.emitted); ++i) {
      const TokenOrigin origin = i < r.accepted ? TokenOrigin::AcceptedDraft : r.bonus ? TokenOrigin::Bonus : TokenOrigin::Correction;
      record.origins[static_cast<size_t>(r.start_length + i)] = origin;
    }
  }
}

// Every entry is born at the moment of the event that wrote it.
void rebirth(const std::vector<CacheEvent>& events, KvLedger& ledger) {
  std::vector<LedgerEntry> entries = ledger.entries();
  for (const CacheEvent& e : events) {
    for (int64_t entry : e.written) {
      if (entry < 0 || entry >= static_cast<int64_t>(entries.size())) continue;
      entries[static_cast<size_t>(entry)].born_round = e.round;
      entries[static_cast<size_t>(entry)].born_phase = e.phase;
    }
  }
  ledger.restore(std::move(entries), ledger.keyRows(), ledger.valueRows());
}

}  // namespace

CaptureRecordView captureRecordView(const CaptureTimeline& timeline) {
  CaptureRecordView view;
  SessionRecord& record = view.record;
  record.sequence = timeline.record.sequence;
  record.ledger = timeline.record.ledger;
  record.use_cache = timeline.record.use_cache;
  record.target_layers = timeline.record.target_layers;
  record.drafter_layers = timeline.record.drafter_layers;
  record.fault = "none";
  inferRounds(timeline, record);

  const std::vector<Moment> moments = stepMoments(timeline);
  std::vector<size_t> order(timeline.steps.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Within a prune, the target's rollback first, as kvscope's own loop does
  // it (and as check names it when both caches kept the same rejected drafts).
  const auto targetFirst = [&](size_t s) {
    return moments[s].phase == Phase::Prune && timeline.steps[s].role == CaptureRole::Drafter ? 1 : 0;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (momentBefore(moments[a], moments[b])) return true;
    return !momentBefore(moments[b], moments[a]) && targetFirst(a) < targetFirst(b);
  });
  view.event_of_step.assign(order.size(), 0);
  std::vector<CacheEvent> events;
  for (size_t i = 0; i < order.size(); ++i) {
    CacheEvent e = timeline.event(order[i]);
    e.round = moments[order[i]].round;
    e.phase = moments[order[i]].phase;
    events.push_back(std::move(e));
    view.event_of_step[order[i]] = i;
  }
  rebirth(events, record.ledger);
  view.step_of_event = order;
  for (CacheEvent& e : events) record.events.record(std::move(e));
  return view;
}

}  // namespace kvscope
