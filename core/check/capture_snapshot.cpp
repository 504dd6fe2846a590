#include "core/check/capture_snapshot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check/capture_attention.h"
#include "core/snapshot/snapshot_builder.h"

namespace kvscope {

namespace {

bool momentBefore(const Moment& a, const Moment& b) { return !atOrBefore(b, a); }

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
CacheAudit breachAudit(const RootCause& breach, const CacheEvent& event) {
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

DiffReport captureDiffReport(const CaptureTimeline& timeline, const CaptureRecordView& view,
                             const CaptureCheckReport& report) {
  DiffReport diff;
  diff.mode = "capture";
  const auto& events = view.record.events.events();
  if (report.root_cause) {
    const RootCause& cause = *report.root_cause;
    diff.root_cause = cause;
    diff.audit_at_divergence = breachAudit(cause, events.at(static_cast<size_t>(cause.event_index)));
  }
  // The shown sequence's rows within tolerance (a batch's count of rows
  // checked is every sequence's); past the kept rows, the count alone.
  const bool all_kept = report.agreeing_rows.size() < kMaxKeptLogitRows;
  diff.agree = all_kept ? static_cast<int64_t>(report.agreeing_rows.size())
                        : report.logit_rows_checked - (report.first_divergence ? 1 : 0);
  for (const CaptureLogitRow& row : report.agreeing_rows) {
    PositionDiff point;
    point.cache = cacheRoleOf(row.role);
    point.round = events.at(view.event_of_step[row.step]).round;
    point.position = row.position;
    point.max_abs_logit_diff = row.max_abs_delta;
    point.kl = row.kl.value_or(0);
    point.verdict = PositionClass::Agree;
    diff.positions.push_back(point);
  }
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
      break;
    }
  }
  return diff;
}

std::shared_ptr<SessionSnapshot> captureSnapshot(const CaptureFile& file, const CaptureTimeline& timeline,
                                                 CaptureRecordView view, const CaptureCheckReport& report,
                                                 const CaptureSnapshotSource& source, SnapshotBuilder& builder) {
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
