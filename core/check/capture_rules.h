#pragma once
// What only a capture of another engine knows, as rules for the one
// root-cause walker (core/audit/contract_walk.h), which walks the capture's
// record in the order its operations happened (capture_record_view.h):
// - each event is judged against its round's token stream (capture_timeline.h);
// - an engine may keep wrong rows and hide them with its attention mask
//   instead of removing them (tree attention does): rows the next forward's
//   mask hides are excused, and the mask itself is checked (each input sees
//   exactly the positions before it);
// - a forward that got no cache although rows came before its inputs lost them;
// - the rows a forward wrote equal a reference forward of the stream within
//   the tolerance of the rows' dtype (kv_tolerance.h);
// - the sentences name the engine's calls ("between target calls 1 and 2"),
//   not kvscope's rounds.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/audit/audit_report.h"
#include "core/audit/contract_walk.h"
#include "core/audit/root_cause.h"
#include "core/check/capture_record_view.h"
#include "core/check/reference_streams.h"

namespace kvscope {

class CaptureRules : public ContractRules {
 public:
  CaptureRules(const CaptureFile& file, const CaptureTimeline& timeline, const CaptureRecordView& view,
               CaptureReferences& references, const TokenText& text);

  std::vector<int64_t> streamOf(size_t index) const override;
  std::unordered_set<int64_t> hiddenRows(size_t index) const override;
  std::optional<RootCause> forwardBreach(size_t index) override;
  std::optional<RootCause> valueBreach(size_t index) override;
  void describe(RootCause& cause) const override;

  int64_t rowsValueChecked() const { return rows_value_checked_; }
  double maxValueError() const { return max_value_error_; }

 private:
  // The next forward of a step's role, from that step on, and what its mask hides.
  struct NextMask {
    std::unordered_set<int64_t> hidden;  // entries no input sees
    int64_t call = -1;                   // the forward whose mask it is
    bool explicit_mask = false;          // a mask of the engine's own (not padding)
  };
  NextMask nextMask(size_t step) const;

  const CaptureStep& stepOf(size_t index) const { return timeline_.steps[view_.step_of_event.at(index)]; }
  const CaptureCall& callOf(const CaptureStep& step) const { return file_.manifest().calls[step.manifest_call]; }
  const CacheEvent& eventOf(size_t index) const { return view_.record.events.events()[index]; }
  RootCause causeAt(size_t index) const;
  // A reference row [kv_heads, head_dim] cut to the KV heads the capture's
  // rows hold: all of them, or a tensor-parallel rank's (capture_shard.h).
  at::Tensor heldHeads(CaptureRole role, const at::Tensor& reference) const;
  bool isEmpty(const CaptureStep& step, int64_t entry) const;
  bool isRing(const CaptureCall& call, int64_t layer) const;

  std::optional<RootCause> lostCache(size_t index) const;
  std::optional<RootCause> mask(size_t index) const;
  std::optional<RootCause> recurrentState(size_t index) const;  // version 3's recurrent state (recurrent_rule.h)

  std::string quoted(int64_t token) const;
  std::string rowText(const RowVerdict& v, const CaptureStep& step) const;
  std::string layersText(const RootCause& c) const;
  std::optional<int64_t> wrongToken(const CaptureStep& step) const;
  void describeBetween(RootCause& c, const CaptureStep& step) const;
  void describeForward(RootCause& c, const CaptureStep& step) const;

  const CaptureFile& file_;
  const CaptureTimeline& timeline_;
  const CaptureRecordView& view_;
  CaptureReferences& references_;
  const TokenText& text_;
  std::array<AuditTolerance, kCaptureRoles> tolerance_;
  int64_t rows_value_checked_ = 0;
  double max_value_error_ = 0;
};

}  // namespace kvscope
