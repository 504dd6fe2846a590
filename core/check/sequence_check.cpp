#include "core/check/sequence_check.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/check/freed_block_rule.h"
#include "core/check/paged_explanation.h"

namespace kvscope {
namespace {

class RunClock {
 public:
  explicit RunClock(const CaptureManifest& manifest) {
    for (size_t p = 0; p < manifest.calls.size(); ++p) position_[{manifest.calls[p].role, manifest.calls[p].index}] = p;
  }

  // A sequence view's call `view_call` (an index into its manifest's calls).
  RunTime forward(const CaptureManifest& view, size_t view_call) const { return {positionOf(view, view_call), 0, 0}; }

  // A change a sequence's cache went through before `view_call`: it happened
  // after the role's previous call, and a drafter's opening its round after
  // the verify that decided it (capture_record_view.h).
  RunTime between(const CaptureManifest& view, size_t view_call) const {
    const CaptureRole role = view.calls[view_call].role;
    size_t anchor = 0;
    for (size_t c = 0; c < view_call; ++c) {
      if (view.calls[c].role == role || view.calls[c].role == CaptureRole::Target) anchor = positionOf(view, c);
    }
    return {anchor, 1, role == CaptureRole::Drafter ? 1 : 0};
  }

 private:
  size_t positionOf(const CaptureManifest& view, size_t view_call) const {
    const CaptureCall& call = view.calls[view_call];
    return position_.at({call.role, call.index});
  }

  std::map<std::pair<CaptureRole, int64_t>, size_t> position_;
};

RunTime rootCauseTime(const RunClock& clock, const CaptureFile& view, const CaptureTimeline& timeline,
                   const CaptureRecordView& record, const RootCause& cause) {
  const CaptureStep& step = timeline.steps[record.step_of_event[static_cast<size_t>(cause.event_index)]];
  return step.operation == CaptureOperation::Forward ? clock.forward(view.manifest(), step.manifest_call)
                                                     : clock.between(view.manifest(), step.manifest_call);
}

RunTime divergenceTime(const RunClock& clock, const CaptureFile& view, const CaptureDivergence& d) {
  const auto& calls = view.manifest().calls;
  for (size_t c = 0; c < calls.size(); ++c) {
    if (calls[c].role == d.role && calls[c].index == d.call) return clock.forward(view.manifest(), c);
  }
  return {calls.size(), 0, 0};
}

void addNotes(std::vector<std::string>& notes, const std::vector<std::string>& more) {
  for (const std::string& note : more) {
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
}

// Indexed by the target's call index in the file (a sequence's view drops
// the calls that fed it nothing, keeping the others' indices).
std::vector<int64_t> acceptedPerCall(const CaptureFile& view, const CaptureTimeline& timeline) {
  std::vector<int64_t> indices;  // the view's target calls' indices, in order
  for (const CaptureCall& call : view.manifest().calls) {
    if (call.role == CaptureRole::Target) indices.push_back(call.index);
  }
  std::vector<int64_t> out(indices.empty() ? 0 : static_cast<size_t>(indices.back() + 1), -1);
  for (size_t j = 1; j < indices.size() && j + 1 < timeline.frontiers.size(); ++j) {
    out[static_cast<size_t>(indices[j])] = std::max<int64_t>(-1, timeline.frontiers[j + 1] - timeline.frontiers[j] - 1);
  }
  return out;
}

std::string sequenceNamed(int64_t sequence, const std::string& what) {
  return "sequence " + std::to_string(sequence) + ": " + what;
}

}  // namespace

std::string SequenceCheck::brokenSequences() const {
  std::string out;
  for (const SequenceVerdict& v : sequences) {
    if (!v.ok()) out += (out.empty() ? "" : ", ") + std::to_string(v.sequence);
  }
  return out.empty() ? "none" : out;
}

CaptureCheckReport SequenceCheck::shownReport() const {
  CaptureCheckReport shown = report;
  const SequenceVerdict& verdict = sequences.at(static_cast<size_t>(shown_sequence));
  shown.root_cause = verdict.root_cause;
  shown.first_divergence = verdict.first_divergence;
  return shown;
}

SequenceCheck checkEverySequence(const CaptureFile& file, const CaptureCheckOptions& options, const TokenText& text,
                                 int64_t show) {
  const RunClock clock(file.manifest());
  const bool batched = file.sequences() > 1;
  SequenceCheck out;
  CaptureCheckReport& run = out.report;
  std::optional<RunTime> first_breach, first_divergence;
  for (int64_t b = 0; b < file.sequences(); ++b) {
    auto view = file.sequence(b);
    CaptureTimeline timeline = buildCaptureTimeline(*view);
    CaptureRecordView record = captureRecordView(timeline);
    // A paged engine's rollback that freed blocks past its kept rows and still maps them.
    markBlocksFreedWhileMapped(file.manifest(), b, view->manifest(), timeline, record);
    CaptureCheckReport report = checkCapture(*view, timeline, record, options, text);
    SequenceVerdict verdict{b, report.root_cause, report.first_divergence, acceptedPerCall(*view, timeline)};
    bool earliest = false;
    if (verdict.root_cause) {
      verdict.root_cause->sequence = b;
      // A paged engine: where the wrong rows came from, read off the named state's blocks (paged_explanation.h).
      if (const auto paged = explainPagedRows(file.manifest(), *verdict.root_cause))
        verdict.root_cause->what += paged->sentence;
      if (batched) verdict.root_cause->what = sequenceNamed(b, verdict.root_cause->what);
      const RunTime when = rootCauseTime(clock, *view, timeline, record, *verdict.root_cause);
      if (!first_breach || when < *first_breach) {
        first_breach = when;
        run.root_cause = verdict.root_cause;
        earliest = true;
      }
    }
    if (verdict.first_divergence) {
      verdict.first_divergence->sequence = b;
      if (batched) verdict.first_divergence->what = sequenceNamed(b, verdict.first_divergence->what);
      const RunTime when = divergenceTime(clock, *view, *verdict.first_divergence);
      if (!first_divergence || when < *first_divergence) {
        first_divergence = when;
        run.first_divergence = verdict.first_divergence;
      }
    }
    run.committed_inferred = run.committed_inferred || report.committed_inferred;
    run.rows_value_checked += report.rows_value_checked;
    run.max_value_error = std::max(run.max_value_error, report.max_value_error);
    run.logit_rows_checked += report.logit_rows_checked;
    addNotes(run.notes, report.notes);
    out.sequences.push_back(std::move(verdict));
    // Keep the timeline a viewer will draw: the one asked for, else the
    // earliest breach's, else sequence 0's.
    if (show >= 0 ? b == show : (b == 0 || earliest)) {
      out.shown_sequence = b;
      run.agreeing_rows = std::move(report.agreeing_rows);  // the shown sequence's, for its views
      out.view = std::move(view);
      out.timeline = std::move(timeline);
      out.record = std::move(record);
    }
  }
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (const CaptureModel* m = file.manifest().model(static_cast<CaptureRole>(r))) run.calls[static_cast<size_t>(r)] = m->calls;
  }
  out.root_cause_time = first_breach;
  out.divergence_time = first_divergence;
  return out;
}

}  // namespace kvscope
