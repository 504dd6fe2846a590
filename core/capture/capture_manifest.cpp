// Names of the manifest's enums and the decoding of a layer's slot runs.
#include "core/capture/capture_manifest.h"

namespace kvscope {

const char* captureRoleName(CaptureRole role) { return role == CaptureRole::Target ? "target" : "drafter"; }

const char* captureLayerKindName(CaptureLayerKind kind) {
  switch (kind) {
    case CaptureLayerKind::Append: return "append";
    case CaptureLayerKind::Static: return "static";
    case CaptureLayerKind::Ring: return "ring";
  }
  return "?";
}

const char* capturePositionsSourceName(CapturePositionsSource source) {
  switch (source) {
    case CapturePositionsSource::PositionIds: return "position_ids";
    case CapturePositionsSource::CachePosition: return "cache_position";
    case CapturePositionsSource::PastLength: return "past_length";
  }
  return "?";
}

const char* captureMaskKindName(CaptureMaskKind kind) {
  return kind == CaptureMaskKind::Padding ? "padding" : "explicit";
}

const char* captureBetweenKindName(CaptureBetweenKind kind) {
  switch (kind) {
    case CaptureBetweenKind::None: return "none";
    case CaptureBetweenKind::Crop: return "crop";
    case CaptureBetweenKind::Slice: return "slice";
    case CaptureBetweenKind::Reset: return "reset";
    case CaptureBetweenKind::Overwrite: return "overwrite";
    case CaptureBetweenKind::Roll: return "roll";
    case CaptureBetweenKind::Replace: return "replace";
  }
  return "?";
}

namespace {

std::vector<int64_t> decodeRuns(const std::vector<CaptureSlotRun>& runs, int64_t slot_count) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(slot_count));  // validated <= kMaxSlots
  for (const auto& run : runs)
    for (int64_t i = 0; i < run.count; ++i) out.push_back(run.first < 0 ? run.first : run.first + i);
  return out;
}

}  // namespace

std::vector<int64_t> CaptureLayerState::slotRows() const { return decodeRuns(runs, slot_count); }

std::vector<int64_t> CaptureLayerState::sequenceSlotRows(size_t sequence) const {
  return decodeRuns(sequence_runs.at(sequence), slot_count);
}

const CaptureModel* CaptureManifest::model(CaptureRole role) const {
  const auto& slot = models[static_cast<int>(role)];
  return slot ? &*slot : nullptr;
}

const CaptureCall* findCall(const CaptureManifest& manifest, CaptureRole role, int64_t index) {
  for (const CaptureCall& call : manifest.calls)
    if (call.role == role && call.index == index) return &call;
  return nullptr;
}

}  // namespace kvscope
