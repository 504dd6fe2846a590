// Opening a .kvcapture: the spec's validation steps in order, then access
// to the tensors it holds.
#include "core/capture/capture_file.h"

#include <cstring>

#include "core/capture/capture_limits.h"
#include "core/capture/capture_parse.h"
#include "core/capture/capture_sequence.h"
#include "core/capture/capture_recurrent.h"  // version 3: recurrent states
#include "core/capture/capture_shard.h"
#include "core/error.h"

namespace kvscope {

namespace {

float fromBits(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, 4);
  return value;
}

float bfloat16ToFloat(uint16_t half) { return fromBits(static_cast<uint32_t>(half) << 16); }

// IEEE binary16 to binary32, subnormals, infinities and NaN included.
float float16ToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  if (exponent == 0x1f) return fromBits(sign | 0x7f800000 | (mantissa << 13));
  if (exponent != 0) return fromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return fromBits(sign);
  // Subnormal: normalize the mantissa.
  int shift = 0;
  while ((mantissa & 0x400) == 0) mantissa <<= 1, ++shift;
  return fromBits(sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ff) << 13));
}

float elementAsFloat(const uint8_t* bytes, StDType dtype) {
  if (dtype == StDType::F32) {
    float value = 0;
    std::memcpy(&value, bytes, 4);
    return value;
  }
  uint16_t half = 0;
  std::memcpy(&half, bytes, 2);
  return dtype == StDType::BF16 ? bfloat16ToFloat(half) : float16ToFloat(half);
}

// Adds a state's slots (every layer, every sequence) to the file's total,
// which a reader walks state by state: bounded, so that a file of many small
// runs of 2^24 empty slots cannot make the walk take minutes.
void countSlots(const std::string& path, const std::string& what, const std::optional<CaptureCacheState>& state,
                int64_t batch, int64_t& file_slots) {
  if (!state) return;
  for (const CaptureLayerState& layer : state->layers) file_slots += layer.slot_count * batch;  // <= 2^24 per state
  if (file_slots > capture_limits::kMaxCaptureSlots)
    fail(path, what + " brings the slots of the capture's states to " + std::to_string(file_slots) +
                   " (every call, layer and sequence together), the limit is " +
                   std::to_string(capture_limits::kMaxCaptureSlots));
}

// Steps 6-10 for one call, in the spec's order.
CaptureCall readCall(const std::string& path, const nlohmann::json& value, size_t position,
                     const CaptureManifest& manifest, std::array<int64_t, kCaptureRoles>& next_index,
                     CaptureValidator& validator, int64_t& file_slots) {
  CaptureCall call = parseCallHead(path, value, position, manifest, next_index);
  const std::string what = describeCall(position, call);
  const CaptureModel& model = *manifest.model(call.role);
  call.before = parseCacheState(path, what, value, "before", model, manifest);
  countSlots(path, what + ": before", call.before, manifest.batch, file_slots);
  if (call.before) validator.checkState(what + ": before", call.role, *call.before);
  call.after = parseCacheState(path, what, value, "after", model, manifest);
  countSlots(path, what + ": after", call.after, manifest.batch, file_slots);
  if (call.after) validator.checkState(what + ": after", call.role, *call.after);
  call.between = parseBetween(path, what, value, call.index, model.layers);
  call.attention_mask = parseMaskRef(path, what, value);
  validator.checkMask(what, call);
  call.logits = parseLogitsRef(path, what, value, static_cast<int64_t>(call.input_ids.size()), manifest);
  validator.checkLogits(what, call, manifest);
  // A hybrid model's recurrent states (version 3, docs/capture-format-v3.md, "Recurrent state").
  call.recurrent = capture_recurrent::parseCallRecurrent(path, what, value, call, manifest);
  return call;
}

bool holdsPadding(const CaptureManifest& manifest) {
  for (const auto& call : manifest.calls)
    for (const auto* state : {&call.before, &call.after})
      if (*state)
        for (const auto& layer : (*state)->layers)
          for (const auto& runs : layer.sequence_runs)
            for (const auto& run : runs)
              if (run.first == kCapturePaddingSlot) return true;
  return false;
}

}  // namespace

CaptureFile::CaptureFile(std::shared_ptr<const SafetensorsFile> file) : file_(std::move(file)) {}

std::shared_ptr<const CaptureFile> CaptureFile::open(const std::string& path) {
  // Steps 1 and 3 (and the header's JSON of step 2): the safetensors reader
  // checks the header length, entries and tiling before mapping any tensor.
  std::shared_ptr<CaptureFile> capture(new CaptureFile(SafetensorsFile::open(path)));
  const nlohmann::json manifest_json = parseCaptureMetadata(path, capture->file_->metadata());  // step 2
  CaptureManifest& manifest = capture->manifest_;
  parseManifestHead(path, manifest_json, manifest);  // step 4
  parseModels(path, manifest_json, manifest);        // step 5
  manifest.shard = parseCaptureShard(path, manifest_json, manifest);
  capture_recurrent::parseRecurrentStates(path, manifest_json, manifest);  // version 3: recurrent states
  CaptureValidator validator(path, *capture->file_, manifest.version, manifest.batch);
  for (const auto& model : manifest.models)
    if (model) validator.checkModelTensors(*model);
  requireRowHeads(path, manifest, validator);

  const nlohmann::json& calls = captureCallsArray(path, manifest_json);  // steps 6-10
  std::array<int64_t, kCaptureRoles> next_index{0, 0};
  manifest.calls.reserve(calls.size());  // <= kMaxCalls
  int64_t file_slots = 0;
  for (size_t position = 0; position < calls.size(); ++position)
    manifest.calls.push_back(readCall(path, calls[position], position, manifest, next_index, validator, file_slots));
  checkCallCounts(path, manifest, next_index);
  manifest.has_padding_slots = holdsPadding(manifest);
  validator.checkEveryTensorReferenced();  // step 11

  for (int role = 0; role < kCaptureRoles; ++role)
    if (const auto& model = manifest.models[role])
      for (int64_t layer = 0; layer < model->layers; ++layer)
        capture->rows_[role].push_back(validator.rowTensors(model->role, layer));
  return capture;
}

std::shared_ptr<const CaptureFile> CaptureFile::sequence(int64_t sequence) const {
  CaptureSequenceView view = captureSequenceView(manifest_, sequence, path());
  auto out = std::shared_ptr<CaptureFile>(new CaptureFile(*this));
  out->manifest_ = std::move(view.manifest);
  out->sequence_index_ = sequence;
  for (const CaptureSlice& slice : view.slices) {
    const StTensorInfo& whole = *file_->find(slice.of);  // [B, R, ...]: validated at open
    uint64_t row_bytes = stDTypeSize(whole.dtype);
    for (size_t d = 2; d < whole.shape.size(); ++d) row_bytes *= static_cast<uint64_t>(whole.shape[d]);
    StTensorInfo info = whole;
    info.name = slice.name;
    info.shape.erase(info.shape.begin());
    info.shape.front() = slice.rows;
    info.begin = whole.begin + static_cast<uint64_t>(slice.sequence * whole.shape[1] + slice.first_row) * row_bytes;
    info.end = info.begin + static_cast<uint64_t>(slice.rows) * row_bytes;
    out->slices_[slice.name] = std::move(info);
  }
  return out;
}

CaptureTensor CaptureFile::tensor(const std::string& name) const {
  if (const auto it = slices_.find(name); it != slices_.end()) return {&it->second, file_->data(it->second)};
  const StTensorInfo* info = file_->find(name);
  if (info == nullptr) fail(path(), "no tensor '" + name + "' in the capture");
  return {info, file_->data(*info)};
}

const CaptureRowTensors& CaptureFile::rowTensors(CaptureRole role, int64_t layer) const {
  const auto& layers = rows_[static_cast<int>(role)];
  if (layer < 0 || layer >= static_cast<int64_t>(layers.size()))
    fail(path(), std::string("no layer ") + std::to_string(layer) + " for role " + captureRoleName(role) +
                     " (it has " + std::to_string(layers.size()) + ")");
  return layers[static_cast<size_t>(layer)];
}

CaptureTensor CaptureFile::rows(CaptureRole role, int64_t layer, CaptureKV part) const {
  const CaptureRowTensors& pair = rowTensors(role, layer);
  const StTensorInfo* info = part == CaptureKV::Keys ? pair.keys : pair.values;
  return {info, file_->data(*info)};
}

int64_t CaptureFile::rowCount(CaptureRole role, int64_t layer) const { return rowTensors(role, layer).rows(); }

std::vector<float> CaptureFile::rowsFloat32(CaptureRole role, int64_t layer, CaptureKV part, int64_t first,
                                            int64_t count) const {
  const CaptureRowTensors& pair = rowTensors(role, layer);
  if (first < 0 || count < 0 || first > pair.rows() - count)
    fail(path(), "rows " + std::to_string(first) + " + " + std::to_string(count) + " of " + pair.keys->name +
                     " out of its " + std::to_string(pair.rows()) + " rows");
  const CaptureTensor stored = rows(role, layer, part);
  const size_t element = stDTypeSize(stored.dtype());
  const int64_t heads = pair.kv_heads(), dim = pair.head_dim(), n_rows = pair.rows();
  std::vector<float> out;
  out.reserve(static_cast<size_t>(heads * count * dim));  // bounded by the tensor the file holds
  for (int64_t head = 0; head < heads; ++head)
    for (int64_t row = first; row < first + count; ++row) {
      const uint8_t* base = stored.data + static_cast<size_t>((head * n_rows + row) * dim) * element;
      for (int64_t d = 0; d < dim; ++d) out.push_back(elementAsFloat(base + static_cast<size_t>(d) * element, stored.dtype()));
    }
  return out;
}

}  // namespace kvscope
