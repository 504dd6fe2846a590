#include "core/check/capture_snapshot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check/capture_attention.h"
#include "core/snapshot/snapshot_builder.h"

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
  std::vector<int64_t> drafter_stream_seen;  // streams the drafter has had a step in
  for (const CaptureStep& step : timeline.steps) {
    const int64_t stream = step.stream;
    const bool forward = step.operation == CaptureOperation::Forward;
    Moment m{stream, Phase::Draft};
    if (stream == 0) {
      m = {0, Phase::Prefill};
    } else if (step.role == CaptureRole::Target) {
      m = forward ? Moment{stream, Phase::Verify} : Moment{stream - 1, Phase::Prune};
    } else if (!forward && std::find(drafter_stream_seen.begin(), drafter_stream_seen.end(), stream) == drafter_stream_seen.end()) {
      m = {stream - 1, Phase::Prune};
    }
    if (step.role == CaptureRole::Drafter) drafter_stream_seen.push_back(stream);
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
                                         [&](const CaptureStep& s) { return s.stream == target_calls && target_calls > 0; });
  if (drafted_after) {
    RoundRecord open;
    open.index = target_calls;
    open.start_length = committed;
    record.rounds.push_back(open);
  }
  for (RoundRecord& r : record.rounds) {
    for (const CaptureStep& s : timeline.steps) {
      if (s.stream != r.index || s.operation != CaptureOperation::Forward) continue;
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

CacheGeometry geometryOf(const CaptureFile& file, CaptureRole role, int64_t layers) {
  CacheGeometry g;
  const auto& model = file.manifest().models[static_cast<int>(role)];
  if (!model || layers <= 0) return g;
  const auto& shape = file.rows(role, 0, CaptureKV::Keys).shape();  // [kv_heads, n_rows, head_dim]
  g.present = true;
  g.layers = layers;
  g.kv_heads = shape[0];
  g.head_dim = shape[2];
  g.heads = model->config.num_attention_heads.value_or(g.kv_heads);
  return g;
}

// The breach's rows as an audit of the cache just after its event: the
// verdict cells the diff panel draws (values only where the check compared them).
CacheAudit breachAudit(const CaptureBreach& breach, const CacheEvent& event) {
  CacheAudit audit;
  audit.cache = event.cache;
  audit.moment = event.moment();
  audit.expected_rows = event.expected_rows;
  audit.expected_first = event.expected_first;
  audit.rows_per_layer = event.rows_after;
  audit.values_checked = breach.kind == "values";
  audit.rows = breach.verdicts;
  for (int64_t rows : event.rows_after) {
    audit.error.emplace_back(static_cast<size_t>(std::max<int64_t>(rows, 0)), std::numeric_limits<double>::quiet_NaN());
  }
  for (const RowVerdict& v : breach.verdicts) {
    if (v.layer < 0 || v.layer >= static_cast<int64_t>(audit.error.size())) continue;
    auto& layer = audit.error[static_cast<size_t>(v.layer)];
    if (v.row < 0 || v.row >= static_cast<int64_t>(layer.size())) continue;
    if (v.max_abs_dk || v.max_abs_dv) layer[static_cast<size_t>(v.row)] = std::max(v.max_abs_dk.value_or(0), v.max_abs_dv.value_or(0));
  }
  return audit;
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
  for (CacheEvent& e : events) record.events.record(std::move(e));
  return view;
}

DiffReport captureDiffReport(const CaptureTimeline& timeline, const CaptureRecordView& view,
                             const CaptureCheckReport& report) {
  DiffReport diff;
  diff.mode = "capture";
  const auto& events = view.record.events.events();
  if (report.root_cause) {
    const CaptureBreach& b = *report.root_cause;
    const size_t index = view.event_of_step.at(b.step);
    const CacheEvent& e = events.at(index);
    RootCause cause;
    cause.event_index = static_cast<int64_t>(index);
    cause.cache = cacheRoleOf(b.role);
    cause.round = e.round;
    cause.phase = e.phase;
    cause.operation = e.kind;
    cause.expected_rows = b.expected_rows;
    cause.actual_rows = b.actual_rows;
    cause.layers = b.layers;
    cause.rows = b.rows;
    cause.verdicts = b.verdicts;
    cause.what = b.what;
    diff.root_cause = cause;
    diff.audit_at_divergence = breachAudit(b, e);
  }
  diff.agree = report.logit_rows_checked;
  if (report.first_divergence) {
    const CaptureDivergence& d = *report.first_divergence;
    for (size_t s = 0; s < timeline.steps.size(); ++s) {
      const CaptureStep& step = timeline.steps[s];
      if (step.role != d.role || step.call != d.call || step.operation != CaptureOperation::Forward) continue;
      const CacheEvent& e = events.at(view.event_of_step[s]);
      FirstDivergence first;
      first.cache = cacheRoleOf(d.role);
      first.round = e.round;
      first.phase = e.phase;
      first.position = d.position;
      diff.first_divergence = first;
      PositionDiff point;
      point.cache = first.cache;
      point.round = e.round;
      point.position = d.position;
      point.max_abs_logit_diff = d.max_abs_delta;
      point.kl = d.kl.value_or(0);
      point.top1_agree = d.engine_top1 == d.reference_top1;
      point.top1_cached = d.engine_top1;
      point.top1_uncached = d.reference_top1;
      point.verdict = PositionClass::Divergent;
      diff.positions.push_back(point);
      diff.max_abs_logit_diff = d.max_abs_delta;
      diff.divergent = 1;
      diff.agree = std::max<int64_t>(0, diff.agree - 1);
      break;
    }
  }
  return diff;
}

std::shared_ptr<SessionSnapshot> captureSnapshot(const CaptureFile& file, const CaptureTimeline& timeline,
                                                 const CaptureCheckReport& report, const CaptureSnapshotSource& source,
                                                 SnapshotBuilder& builder) {
  CaptureRecordView view = captureRecordView(timeline);
  std::vector<std::string> attention_notes;
  if (source.target) {
    CaptureAttention attention = replayVerifyAttention(file, timeline, *source.target);
    view.record.verify = std::move(attention.verify);
    attention_notes = std::move(attention.notes);
  }
  std::shared_ptr<SessionSnapshot> snapshot = builder.build(view.record);
  snapshot->from_capture = true;
  snapshot->opened_file = source.path;
  snapshot->target_name = source.target_name;
  snapshot->drafter_name = source.drafter_name;
  snapshot->target = geometryOf(file, CaptureRole::Target, view.record.target_layers);
  snapshot->drafter = geometryOf(file, CaptureRole::Drafter, view.record.drafter_layers);
  snapshot->vocab = source.vocab;
  snapshot->options_summary = "capture of " + source.engine + ": " + std::to_string(report.calls[0]) + " target calls, " +
                              std::to_string(report.calls[1]) + " drafter calls" +
                              (report.committed_inferred ? ", committed tokens inferred" : "");
  snapshot->notes = source.notes;
  snapshot->notes.insert(snapshot->notes.end(), report.notes.begin(), report.notes.end());
  snapshot->notes.insert(snapshot->notes.end(), attention_notes.begin(), attention_notes.end());
  snapshot->diff = std::make_shared<const DiffReport>(captureDiffReport(timeline, view, report));
  Moment last{0, Phase::Prefill};
  for (const CacheEvent& e : view.record.events.events()) {
    if (momentBefore(last, e.moment())) last = e.moment();
  }
  const Moment next = nextMoment(last);
  snapshot->current_round = next.round;
  snapshot->next_phase = next.phase;
  return snapshot;
}

}  // namespace kvscope
