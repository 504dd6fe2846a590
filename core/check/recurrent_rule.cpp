#include "core/check/recurrent_rule.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_set>

#include "core/capture/capture_recurrent.h"

namespace kvscope {
namespace {

using Fed = RecurrentFed;

}  // namespace

// `from` always names an earlier id (capture_recurrent.h), so the walk ends.
std::vector<RecurrentFed> recurrentStateTokens(const CaptureManifest& manifest, CaptureRole role, int64_t id) {
  const auto& states = manifest.recurrent_states[static_cast<int>(role)];
  std::map<int64_t, const CaptureCall*> calls;  // that role's calls by index
  for (const CaptureCall& call : manifest.calls)
    if (call.role == role) calls[call.index] = &call;
  std::vector<std::vector<Fed>> parts;
  std::optional<int64_t> at = id;
  while (at && *at >= 0 && *at < static_cast<int64_t>(states.size())) {
    const CaptureRecurrentState& state = states[static_cast<size_t>(*at)];
    if (!state.call || !state.input) break;
    const auto found = calls.find(*state.call);
    if (found == calls.end()) break;  // a call of another sequence's view: its tokens are not this sequence's
    const CaptureCall& call = *found->second;
    std::vector<Fed> part;
    const auto last = std::min<int64_t>(*state.input, static_cast<int64_t>(call.input_ids.size()) - 1);
    for (int64_t i = 0; i <= last; ++i)
      part.push_back({call.positions[static_cast<size_t>(i)], call.input_ids[static_cast<size_t>(i)], call.index});
    parts.push_back(std::move(part));
    at = state.from;
  }
  std::vector<Fed> out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out.insert(out.end(), it->begin(), it->end());
  return out;
}

namespace {

std::string sentence(const CaptureCall& call, const RecurrentBreach& b) {
  std::ostringstream out;
  out << captureRoleName(call.role) << " call " << call.index << " resumed from the "
      << capture_recurrent::stateKindName(b.kind) << " state of layer " << b.layer << " ";
  if (b.state_after) out << "after position " << *b.state_after;
  else out << "that no recorded call computed";
  if (b.rejected_drafts_of)
    out << " (it includes the rejected drafts of " << captureRoleName(call.role) << " call " << *b.rejected_drafts_of << ")";
  out << " where the state after position " << b.required_after << " was required";
  return out.str();
}

}  // namespace

std::optional<RecurrentBreach> recurrentBreach(const CaptureManifest& manifest, const CaptureCall& call) {
  if (!call.recurrent || !call.recurrent->before || call.recurrent->before->empty() || call.positions.empty())
    return std::nullopt;
  std::vector<CaptureStateRef> refs = call.recurrent->before->front();
  std::stable_sort(refs.begin(), refs.end(), [](const CaptureStateRef& a, const CaptureStateRef& b) {
    return a.layer != b.layer ? a.layer < b.layer : a.kind < b.kind;  // conv before ssm
  });
  const auto& states = manifest.recurrent_states[static_cast<int>(call.role)];
  const int64_t required = call.positions.front() - 1;
  for (const CaptureStateRef& ref : refs) {
    if (ref.id < 0 || ref.id >= static_cast<int64_t>(states.size())) continue;  // validated at open
    const CaptureRecurrentState& state = states[static_cast<size_t>(ref.id)];
    std::optional<int64_t> rejected;
    if (manifest.committed) {
      for (const Fed& fed : recurrentStateTokens(manifest, call.role, ref.id)) {
        const auto& committed = *manifest.committed;
        if (fed.position >= static_cast<int64_t>(committed.size()) ||
            committed[static_cast<size_t>(fed.position)] != fed.token) {
          rejected = fed.call;
          break;
        }
      }
    }
    const bool right_position = state.call ? state.after_position == required : required == -1;
    if (right_position && !rejected) continue;
    RecurrentBreach breach;
    breach.layer = ref.layer;
    breach.kind = ref.kind;
    breach.state_after = state.call ? state.after_position : std::nullopt;
    breach.required_after = required;
    breach.rejected_drafts_of = rejected;
    breach.what = sentence(call, breach);
    return breach;
  }
  return std::nullopt;
}

}  // namespace kvscope
