// Cross-references between a capture's manifest and its tensor table.
#include "core/capture/capture_validator.h"

#include <algorithm>
#include <cstring>

#include "core/capture/capture_limits.h"
#include "core/error.h"

namespace kvscope {

namespace {

namespace limits = capture_limits;

std::string quoted(const std::string& name) { return "'" + name.substr(0, 200) + "'"; }

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string rowTensorName(CaptureRole role, int64_t layer, const char* part) {
  return std::string(captureRoleName(role)) + ".layer" + std::to_string(layer) + "." + part;
}

}  // namespace

CaptureValidator::CaptureValidator(std::string path, const SafetensorsFile& file, int64_t version, int64_t batch)
    : path_(std::move(path)), file_(file), batched_(version >= 2), batch_(batch),
      referenced_(file.tensors().size(), false) {}

std::vector<int64_t> CaptureValidator::logitsLead(int64_t rows) const {
  return batched_ ? std::vector<int64_t>{batch_, rows} : std::vector<int64_t>{rows};
}

const StTensorInfo& CaptureValidator::reference(const std::string& name, const std::string& use) {
  const StTensorInfo* info = file_.find(name);
  if (info == nullptr) fail(path_, use + " names tensor " + quoted(name) + ", which the file does not hold");
  const auto index = static_cast<size_t>(info - file_.tensors().data());
  if (referenced_[index])
    fail(path_, use + " names tensor " + quoted(name) + ", which another part of the manifest already uses");
  referenced_[index] = true;
  return *info;
}

void CaptureValidator::requireDType(const StTensorInfo& info, const std::string& use, StDType dtype) const {
  if (info.dtype != dtype)
    fail(path_, use + ": tensor " + quoted(info.name) + " has dtype " + stDTypeName(info.dtype) + ", expected " +
                    stDTypeName(dtype));
}

void CaptureValidator::requireShape(const StTensorInfo& info, const std::string& use,
                                    const std::vector<int64_t>& shape) const {
  if (info.shape != shape)
    fail(path_, use + ": tensor " + quoted(info.name) + " has shape " + shapeText(info.shape) + ", expected " +
                    shapeText(shape));
}

void CaptureValidator::checkModelTensors(const CaptureModel& model) {
  auto& layers = rows_[static_cast<int>(model.role)];
  layers.reserve(static_cast<size_t>(model.layers));  // <= kMaxLayers, checked by parseModels
  for (int64_t layer = 0; layer < model.layers; ++layer) {
    const std::string use = std::string("models.") + captureRoleName(model.role) + " layer " + std::to_string(layer);
    CaptureRowTensors pair;
    pair.keys = &reference(rowTensorName(model.role, layer, "keys"), use);
    pair.values = &reference(rowTensorName(model.role, layer, "values"), use);
    const StTensorInfo& keys = *pair.keys;
    if (keys.dtype != StDType::F32 && keys.dtype != StDType::F16 && keys.dtype != StDType::BF16)
      fail(path_, use + ": tensor " + quoted(keys.name) + " has dtype " + stDTypeName(keys.dtype) +
                      ", expected F32, F16 or BF16");
    const auto& shape = keys.shape;
    if (shape.size() != 3 || shape[0] < 1 || shape[0] > limits::kMaxKvHeads || shape[1] > limits::kMaxRows ||
        shape[2] < 1 || shape[2] > limits::kMaxHeadDim)
      fail(path_, use + ": tensor " + quoted(keys.name) + " has shape " + shapeText(shape) +
                      ", expected [kv_heads 1-" + std::to_string(limits::kMaxKvHeads) + ", rows 0-" +
                      std::to_string(limits::kMaxRows) + ", head_dim 1-" + std::to_string(limits::kMaxHeadDim) + "]");
    requireDType(*pair.values, use, keys.dtype);
    requireShape(*pair.values, use, keys.shape);
    layers.push_back(pair);
  }
}

const CaptureRowTensors& CaptureValidator::rowTensors(CaptureRole role, int64_t layer) const {
  return rows_[static_cast<int>(role)].at(static_cast<size_t>(layer));
}

void CaptureValidator::checkState(const std::string& what, CaptureRole role, const CaptureCacheState& state) {
  for (size_t layer = 0; layer < state.layers.size(); ++layer) {
    const std::string at = what + ".layers[" + std::to_string(layer) + "]";
    const CaptureRowTensors& tensors = rowTensors(role, static_cast<int64_t>(layer));
    // Row ranges sorted by their first id: a repeat is an overlap of
    // neighbours. Linear in the runs, where a bitmap would be linear in the
    // rows each run spans, however many times a state repeats them.
    std::vector<CaptureSlotRun> held;
    const auto& sequences = state.layers[layer].sequence_runs;
    for (size_t b = 0; b < sequences.size(); ++b) {
      const std::string where = batched_ ? at + "[" + std::to_string(b) + "]" : at;
      for (const auto& run : sequences[b]) {
        if (run.first < 0) continue;  // empty or padding
        if (run.first + run.count > tensors.rows())
          fail(path_, where + " holds row " +
                          (run.count == 1 ? "id " + std::to_string(run.first)
                                          : "ids " + std::to_string(run.first) + "-" +
                                                std::to_string(run.first + run.count - 1)) +
                          " but " + tensors.keys->name + " has " + std::to_string(tensors.rows()) + " rows");
        held.push_back(run);
      }
    }
    std::sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < held.size(); ++i)
      if (held[i].first < held[i - 1].first + held[i - 1].count)
        fail(path_, at + " holds row id " + std::to_string(held[i].first) + " twice (a row id appears at most once in a " +
                        (batched_ ? "layer of a state, across its sequences)" : "layer of a state)"));
  }
}

int64_t CaptureValidator::maskKeySlots(const std::string& what, const CaptureCall& call) const {
  const auto inputs = static_cast<int64_t>(call.input_ids.size());
  const bool from_after = call.after.has_value();
  const auto* state = from_after ? &*call.after : call.before ? &*call.before : nullptr;
  if (state == nullptr || state->layers.empty()) {
    if (from_after) fail(path_, what + ": attention_mask: the after state has no layers to take the key axis from");
    return inputs;
  }
  const int64_t slots = state->layers[0].slot_count;
  for (size_t layer = 1; layer < state->layers.size(); ++layer)
    if (state->layers[layer].slot_count != slots)
      fail(path_, what + ": attention_mask: " + (from_after ? "after" : "before") + ".layers[" +
                      std::to_string(layer) + "] has " + std::to_string(state->layers[layer].slot_count) +
                      " slots where layer 0 has " + std::to_string(slots) + " (a mask needs one key axis)");
  return from_after ? slots : slots + inputs;
}

void CaptureValidator::checkMask(const std::string& what, const CaptureCall& call) {
  if (!call.attention_mask) return;
  const std::string use = what + ": attention_mask";
  const StTensorInfo& mask = reference(call.attention_mask->tensor, use);
  requireDType(mask, use, StDType::BOOL);
  const bool explicit_mask = call.attention_mask->kind == CaptureMaskKind::Explicit;
  const auto inputs = static_cast<int64_t>(call.input_ids.size());
  const int64_t keys = maskKeySlots(what, call);
  std::vector<int64_t> shape;
  if (batched_)
    shape = explicit_mask ? std::vector<int64_t>{batch_, inputs, keys} : std::vector<int64_t>{batch_, keys};
  else
    shape = {explicit_mask ? inputs : 1, keys};
  requireShape(mask, use + " (" + captureMaskKindName(call.attention_mask->kind) + ")", shape);
}

void CaptureValidator::checkTopIdsInVocab(const std::string& what, const StTensorInfo& ids, int64_t vocab,
                                          bool known) const {
  const uint8_t* bytes = file_.data(ids);
  const uint64_t count = ids.numel();
  for (uint64_t i = 0; i < count; ++i) {
    int32_t id = 0;
    std::memcpy(&id, bytes + 4 * i, 4);  // little-endian on every platform kvscope builds for
    if (id < 0 || id >= vocab)
      fail(path_, what + ": logits top id " + std::to_string(id) + " in " + quoted(ids.name) + " is outside " +
                      (known ? "vocab_size " + std::to_string(vocab)
                             : "[0, " + std::to_string(vocab) + ") (no vocab_size given: the largest vocabulary a capture may have)"));
  }
}

void CaptureValidator::checkLogits(const std::string& what, const CaptureCall& call, const CaptureManifest& manifest) {
  if (!call.logits) return;
  const CaptureLogitsRef& ref = *call.logits;
  const std::string use = what + ": logits";
  const std::vector<int64_t> lead = logitsLead(ref.rows);
  const std::string lead_text = batched_ ? std::to_string(batch_) + ", " + std::to_string(ref.rows) : std::to_string(ref.rows);
  // The last axis of a tensor whose leading axes are `lead`, or -1 when they are not.
  auto lastAxis = [&](const StTensorInfo& info) -> int64_t {
    if (info.shape.size() != lead.size() + 1 || !std::equal(lead.begin(), lead.end(), info.shape.begin())) return -1;
    return info.shape.back();
  };
  if (manifest.logits_mode == CaptureLogitsMode::Full) {
    const StTensorInfo& logits = reference(ref.logits, use);
    requireDType(logits, use, StDType::F32);
    const int64_t v = lastAxis(logits);
    if (v < 1 || v > limits::kMaxLogitsWidth)
      fail(path_, use + ": tensor " + quoted(logits.name) + " has shape " + shapeText(logits.shape) + ", expected [" +
                      lead_text + ", V] with 1 <= V <= " + std::to_string(limits::kMaxLogitsWidth));
    int64_t& width = logits_width_[static_cast<int>(call.role)];
    if (width == 0) width = v;
    if (v != width)
      fail(path_, use + ": width " + std::to_string(v) + " but earlier " + captureRoleName(call.role) +
                      " calls have " + std::to_string(width));
    checkReferenceLogits(use, ref, lead, v);
    return;
  }
  const StTensorInfo& ids = reference(ref.top_ids, use + ".top_ids");
  requireDType(ids, use + ".top_ids", StDType::I32);
  const int64_t k = lastAxis(ids);
  if (k < 1 || k > manifest.top_k)
    fail(path_, use + ".top_ids: tensor " + quoted(ids.name) + " has shape " + shapeText(ids.shape) + ", expected [" +
                    lead_text + ", k'] with 1 <= k' <= " + std::to_string(manifest.top_k));
  const StTensorInfo& values = reference(ref.top_values, use + ".top_values");
  requireDType(values, use + ".top_values", StDType::F32);
  requireShape(values, use + ".top_values", ids.shape);
  const StTensorInfo& lse = reference(ref.lse, use + ".lse");
  requireDType(lse, use + ".lse", StDType::F32);
  requireShape(lse, use + ".lse", lead);
  // Without a vocab_size, the largest the format allows: a negative id or one
  // past every vocabulary is a broken file, not a row for the check to skip.
  const auto& vocab = manifest.model(call.role)->config.vocab_size;
  checkTopIdsInVocab(what, ids, vocab.value_or(limits::kMaxLogitsWidth), vocab.has_value());
  if (!ref.reference.empty()) {
    // Full rows of the reference: as wide as the vocabulary when the config gives it.
    const StTensorInfo* peek = file_.find(ref.reference);  // checkReferenceLogits refuses a missing one
    const int64_t width = peek != nullptr && !peek->shape.empty() ? peek->shape.back() : -1;
    checkReferenceLogits(use, ref, lead, vocab.value_or(width));
  }
}

void CaptureValidator::checkReferenceLogits(const std::string& use, const CaptureLogitsRef& ref,
                                            const std::vector<int64_t>& lead, int64_t width) {
  if (ref.reference.empty()) return;
  const StTensorInfo& info = reference(ref.reference, use + ".reference");
  requireDType(info, use + ".reference", StDType::F32);
  std::vector<int64_t> shape = lead;
  shape.push_back(width);
  if (width < 1 || width > limits::kMaxLogitsWidth)
    fail(path_, use + ".reference: tensor " + quoted(info.name) + " has shape " + shapeText(info.shape) +
                    ", expected full rows [..., V] with 1 <= V <= " + std::to_string(limits::kMaxLogitsWidth));
  requireShape(info, use + ".reference", shape);
}

void CaptureValidator::checkEveryTensorReferenced() const {
  for (size_t i = 0; i < referenced_.size(); ++i)
    if (!referenced_[i])
      fail(path_, "tensor " + quoted(file_.tensors()[i].name) +
                      " is referenced by no model or call (every tensor of a capture must be)");
}

}  // namespace kvscope
