#include "core/capture/capture_sequence.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {
namespace {

std::string describe(const CaptureCall& call) {
  return std::string(captureRoleName(call.role)) + " call " + std::to_string(call.index);
}

bool holdsPadding(const std::vector<CaptureSlotRun>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const CaptureSlotRun& run) { return run.first == kCapturePaddingSlot; });
}

// Sequence b's slots of a state without its padding slots. A static or ring
// slot's index is the cache position it holds, so dropping slots there would
// move positions: refused rather than misread.
CaptureCacheState sequenceState(const CaptureCacheState& state, size_t b, const std::string& path,
                                const std::string& what) {
  CaptureCacheState out;  // a sequence's view keeps no paged pool: check reads it from the file (paged_explanation.h)
  out.cache = state.cache;
  for (size_t l = 0; l < state.layers.size(); ++l) {
    const CaptureLayerState& layer = state.layers[l];
    const std::vector<CaptureSlotRun>& runs = layer.sequence_runs.at(b);
    if (layer.kind != CaptureLayerKind::Append && holdsPadding(runs)) {
      fail(path, what + ": layer " + std::to_string(l) + " is a " + captureLayerKindName(layer.kind) +
                     " layer with padding slots for sequence " + std::to_string(b) +
                     "; kvscope checks padding in growing (append) caches only, not yet in fixed ones");
    }
    CaptureLayerState kept;
    kept.kind = layer.kind;
    for (const CaptureSlotRun& run : runs) {
      if (run.first == kCapturePaddingSlot) continue;
      kept.runs.push_back(run);
      kept.slot_count += run.count;
    }
    kept.sequence_runs.assign(1, kept.runs);
    out.layers.push_back(std::move(kept));
  }
  return out;
}

// Whether each of the call's inputs is one of sequence b's rows rather than a
// pad: the slot it was written to is not a padding slot of the after state.
std::vector<bool> realInputs(const CaptureCall& call, size_t b, const std::string& path) {
  const size_t n = call.batch_input_ids.at(b).size();
  std::vector<bool> real(n, true);
  if (!call.after || call.after->layers.empty()) return real;
  const CaptureLayerState& layer = call.after->layers.front();
  if (layer.kind == CaptureLayerKind::Ring) return real;  // no padding there (sequenceState refuses it)
  const std::vector<int64_t> slots = layer.sequenceSlotRows(b);
  for (size_t i = 0; i < n; ++i) {
    int64_t slot = layer.slot_count - static_cast<int64_t>(n) + static_cast<int64_t>(i);  // append: the last n slots
    if (layer.kind == CaptureLayerKind::Static) {
      if (!call.cache_position) fail(path, describe(call) + ": a static layer without cache_position");
      slot = (*call.cache_position)[i];
    }
    real[i] = slot < 0 || slot >= static_cast<int64_t>(slots.size()) || slots[static_cast<size_t>(slot)] != kCapturePaddingSlot;
  }
  return real;
}

struct InputRange {
  int64_t first = 0;
  int64_t end = 0;  // exclusive; first == end: nothing but pads
};

// The real inputs must be one run: pads before them (left padding) or after
// them (right padding), never between.
InputRange realRange(const std::vector<bool>& real, const CaptureCall& call, size_t b, const std::string& path) {
  const auto n = static_cast<int64_t>(real.size());
  int64_t first = 0;
  while (first < n && !real[static_cast<size_t>(first)]) ++first;
  int64_t end = first;
  while (end < n && real[static_cast<size_t>(end)]) ++end;
  for (int64_t i = end; i < n; ++i) {
    if (real[static_cast<size_t>(i)]) {
      fail(path, describe(call) + ": sequence " + std::to_string(b) +
                     " has pads between its inputs; kvscope checks pads before or after a sequence's inputs only");
    }
  }
  return {first, end};
}

template <typename T>
std::vector<T> part(const std::vector<T>& values, InputRange range) {
  return {values.begin() + range.first, values.begin() + range.end};
}

// Sequence b's logits of the kept inputs: the call has logits for its last
// `rows` inputs.
std::optional<CaptureLogitsRef> sequenceLogits(const CaptureLogitsRef& logits, int64_t inputs, InputRange kept, int64_t b,
                                               std::vector<CaptureSlice>& slices) {
  const int64_t first_input = inputs - logits.rows;  // the input of logits row 0
  const int64_t first = std::max(kept.first, first_input);
  if (kept.end <= first) return std::nullopt;
  CaptureLogitsRef out;
  out.rows = kept.end - first;
  const auto slice = [&](const std::string& name) {
    if (name.empty()) return name;
    const std::string view = name + "@sequence" + std::to_string(b);
    slices.push_back({view, name, b, first - first_input, out.rows});
    return view;
  };
  out.logits = slice(logits.logits);
  out.top_ids = slice(logits.top_ids);
  out.top_values = slice(logits.top_values);
  out.lse = slice(logits.lse);
  out.reference = slice(logits.reference);
  return out;
}

CaptureBetween sequenceBetween(const CaptureBetween& between, int64_t b) {
  // The hint names the first sequence that changed (its `what` starts with
  // "sequence b:"); another sequence's kind says nothing about this one.
  if (between.what.rfind("sequence " + std::to_string(b) + ":", 0) == 0) return between;
  return {};
}

std::optional<CaptureCall> sequenceCall(const CaptureCall& call, const CaptureManifest& manifest, int64_t b,
                                        const std::string& path, std::vector<CaptureSlice>& slices) {
  const auto s = static_cast<size_t>(b);
  const std::string what = describe(call);
  if (call.attention_mask && call.attention_mask->kind == CaptureMaskKind::Explicit) {
    fail(path, what + ": an explicit (per-query) attention mask in a version 2 capture; kvscope checks batches with "
                      "2-D padding masks only");
  }
  const InputRange kept = realRange(realInputs(call, s, path), call, s, path);
  if (kept.first == kept.end) return std::nullopt;
  CaptureCall out;
  out.role = call.role;
  out.index = call.index;
  out.input_ids = part(call.batch_input_ids.at(s), kept);
  out.positions = part(call.batch_positions.at(s), kept);
  out.batch_input_ids.assign(1, out.input_ids);
  out.batch_positions.assign(1, out.positions);
  out.positions_source = call.positions_source;
  if (call.cache_position) out.cache_position = part(*call.cache_position, kept);
  // A padding mask's work is done by the padding slots dropped from the states.
  if (call.before) out.before = sequenceState(*call.before, s, path, what + ": before");
  if (call.after) out.after = sequenceState(*call.after, s, path, what + ": after");
  if (call.between) out.between = manifest.batch > 1 ? sequenceBetween(*call.between, b) : *call.between;
  if (call.recurrent) {  // version 3's recurrent states: sequence b's (ids stay the file's)
    CaptureCallRecurrent recurrent;
    if (call.recurrent->before) recurrent.before.emplace(1, call.recurrent->before->at(s));
    if (call.recurrent->after) recurrent.after.emplace(1, call.recurrent->after->at(s));
    if (!call.recurrent->intermediate.empty()) recurrent.intermediate.assign(1, call.recurrent->intermediate.at(s));
    out.recurrent = std::move(recurrent);
  }
  if (call.logits) {
    out.logits = sequenceLogits(*call.logits, static_cast<int64_t>(call.batch_input_ids.at(s).size()), kept, b, slices);
  }
  return out;
}

}  // namespace

CaptureSequenceView captureSequenceView(const CaptureManifest& manifest, int64_t sequence, const std::string& path) {
  if (sequence < 0 || sequence >= manifest.batch) {
    fail(path, "no sequence " + std::to_string(sequence) + ": the capture holds " + std::to_string(manifest.batch));
  }
  CaptureSequenceView view;
  if (manifest.version == 1) {
    view.manifest = manifest;
    return view;
  }
  CaptureManifest& out = view.manifest;
  out.engine_name = manifest.engine_name;
  out.recorder = manifest.recorder;
  out.complete = manifest.complete;
  out.logits_mode = manifest.logits_mode;
  out.top_k = manifest.top_k;
  out.shard = manifest.shard;
  out.recurrent_states = manifest.recurrent_states;  // version 3: provenance by id, shared by the sequences
  for (int r = 0; r < kCaptureRoles; ++r) {
    out.models[r] = manifest.models[r];
    if (out.models[r]) out.models[r]->calls = 0;
  }
  for (const CaptureCall& call : manifest.calls) {
    auto kept = sequenceCall(call, manifest, sequence, path, view.slices);
    if (!kept) continue;
    ++out.models[static_cast<int>(call.role)]->calls;
    out.calls.push_back(std::move(*kept));
  }
  if (manifest.batch_committed) {
    out.committed = manifest.batch_committed->at(static_cast<size_t>(sequence));
    out.batch_committed.emplace(1, *out.committed);
  }
  return view;
}

}  // namespace kvscope
