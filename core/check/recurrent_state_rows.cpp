#include "core/check/recurrent_state_rows.h"

#include <algorithm>

#include "core/capture/capture_recurrent.h"
#include "core/check/capture_timeline.h"
#include "core/check/recurrent_rule.h"

namespace kvscope {

namespace {

// One state's row: its identity from the manifest, its tokens from its chain.
RecurrentStateRow stateRow(const CaptureManifest& manifest, const CaptureCall& call, const CaptureStateRef& ref,
                           bool before) {
  RecurrentStateRow row;
  row.cache = cacheRoleOf(call.role);
  row.call = call.index;
  row.first_position = call.positions.empty() ? 0 : call.positions.front();
  row.inputs = static_cast<int64_t>(call.positions.size());
  row.before = before;
  row.layer = ref.layer;
  row.kind = capture_recurrent::stateKindName(ref.kind);
  row.id = ref.id;
  const auto& states = manifest.recurrent_states[static_cast<int>(call.role)];
  if (ref.id >= 0 && ref.id < static_cast<int64_t>(states.size())) {
    const CaptureRecurrentState& state = states[static_cast<size_t>(ref.id)];
    row.after_position = state.after_position.value_or(-1);
    row.computed_by_call = state.call.value_or(-1);
  }
  for (const RecurrentFed& fed : recurrentStateTokens(manifest, call.role, ref.id)) {
    row.folded_positions.push_back(fed.position);
    row.folded_tokens.push_back(fed.token);
    const auto& committed = manifest.committed;
    const bool kept = committed && fed.position < static_cast<int64_t>(committed->size()) &&
                      (*committed)[static_cast<size_t>(fed.position)] == fed.token;
    if (committed && !kept && row.rejected_drafts_of < 0) row.rejected_drafts_of = fed.call;
  }
  return row;
}

// Sequence 0's refs (a view holds one sequence), layer then conv before ssm.
std::vector<CaptureStateRef> sortedRefs(const std::optional<std::vector<std::vector<CaptureStateRef>>>& refs) {
  if (!refs || refs->empty()) return {};
  std::vector<CaptureStateRef> out = refs->front();
  std::stable_sort(out.begin(), out.end(), [](const CaptureStateRef& a, const CaptureStateRef& b) {
    return a.layer != b.layer ? a.layer < b.layer : a.kind < b.kind;
  });
  return out;
}

// The rule (recurrent_rule.h): resume from the state after the position
// before the first input over kept tokens; at position 0 from no call's state.
bool breaksRule(const RecurrentStateRow& row) {
  const int64_t required = row.first_position - 1;
  return row.after_position != required || row.rejected_drafts_of >= 0;
}

std::string otherBreach(const RecurrentStateRow& row) {
  std::string out = std::string(row.cache == CacheRole::Target ? "target" : "drafter") + " call " +
                    std::to_string(row.call) + " also resumed from the " + row.kind + " state of layer " +
                    std::to_string(row.layer) + " ";
  out += row.after_position >= 0 ? "after position " + std::to_string(row.after_position) : "that no recorded call computed";
  if (row.rejected_drafts_of >= 0) out += " (it includes the rejected drafts of call " + std::to_string(row.rejected_drafts_of) + ")";
  return out + " where the state after position " + std::to_string(row.first_position - 1) + " was required";
}

bool isRootCause(const std::optional<RootCause>& cause, const RecurrentStateRow& row) {
  return cause && cause->kind == "state" && cause->cache == row.cache && cause->call == row.call && row.before &&
         !cause->layers.empty() && cause->layers.front() == row.layer && cause->state_kind == row.kind;
}

}  // namespace

std::vector<RecurrentStateRow> recurrentStateRows(const CaptureManifest& manifest,
                                                  const std::optional<RootCause>& root_cause) {
  std::vector<RecurrentStateRow> out;
  for (const CaptureCall& call : manifest.calls) {
    if (!call.recurrent) continue;
    const std::optional<RecurrentBreach> breach = recurrentBreach(manifest, call);
    for (const bool before : {true, false}) {
      for (const CaptureStateRef& ref : sortedRefs(before ? call.recurrent->before : call.recurrent->after)) {
        RecurrentStateRow row = stateRow(manifest, call, ref, before);
        if (before && breach && breach->layer == ref.layer && breach->kind == ref.kind) {
          row.breach = true;
          row.what = breach->what;
        } else if (before && breaksRule(row)) {  // the rule names a call's first breach only: mark the others too
          row.breach = true;
          row.what = otherBreach(row);
        }
        row.root_cause = isRootCause(root_cause, row);
        out.push_back(std::move(row));
      }
    }
  }
  return out;
}

}  // namespace kvscope
