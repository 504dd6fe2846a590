// The .kvcapture manifest JSON into structs, one validation step at a time.
#include "core/capture/capture_parse.h"

#include <cmath>

#include "core/capture/capture_limits.h"
#include "core/capture/capture_paged.h"  // version 3: paged pools
#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/json_limits.h"

namespace kvscope {

namespace {

using Json = nlohmann::json;
namespace limits = capture_limits;

const Json kNull;

// The member `key` of `object`, or null when absent: the spec's nullable
// fields may be left out by a writer (the Python reader reads them the same way).
const Json& member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// A member that must be present (it may still be null where the caller allows).
const Json& required(const std::string& path, const std::string& what, const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) fail(path, what + " has no field '" + key + "'");
  return *it;
}

void requireObject(const std::string& path, const std::string& what, const Json& value) {
  if (!value.is_object()) fail(path, what + " must be an object, got " + jsonSnippet(value));
}

// A free-text field, refused past kMaxTextBytes (before a window or an
// error message lays it out).
std::string boundedText(const std::string& path, const std::string& field, const Json& value) {
  std::string text = jsonString(value, path, field);
  if (text.size() > limits::kMaxTextBytes)
    fail(path, field + " is " + std::to_string(text.size()) + " bytes long, the limit is " +
                   std::to_string(limits::kMaxTextBytes));
  return text;
}

// An array of integers with at most `max_count` entries, checked before any
// copy is made.
std::vector<int64_t> boundedIntegers(const std::string& path, const std::string& field, const Json& value,
                                     int64_t max_count, int64_t min, int64_t max) {
  if (value.is_array() && static_cast<int64_t>(value.size()) > max_count)
    fail(path, field + " has " + std::to_string(value.size()) + " entries, the limit is " +
                   std::to_string(max_count));
  return jsonIntegers(value, path, field, min, max);
}

template <typename Enum, size_t N>
Enum parseName(const std::string& path, const std::string& field, const Json& value,
               const std::pair<const char*, Enum> (&names)[N]) {
  if (value.is_string())
    for (const auto& [name, e] : names)
      if (value.get<std::string>() == name) return e;
  std::string known;
  for (const auto& entry : names) known += std::string(known.empty() ? "" : ", ") + entry.first;
  fail(path, field + " must be one of " + known + ", got " + jsonSnippet(value));
}

const std::pair<const char*, CaptureRole> kRoles[] = {{"target", CaptureRole::Target},
                                                      {"drafter", CaptureRole::Drafter}};
const std::pair<const char*, CaptureLayerKind> kLayerKinds[] = {
    {"append", CaptureLayerKind::Append}, {"static", CaptureLayerKind::Static}, {"ring", CaptureLayerKind::Ring}};
const std::pair<const char*, CapturePositionsSource> kSources[] = {
    {"position_ids", CapturePositionsSource::PositionIds},
    {"cache_position", CapturePositionsSource::CachePosition},
    {"past_length", CapturePositionsSource::PastLength}};
const std::pair<const char*, CaptureMaskKind> kMaskKinds[] = {{"padding", CaptureMaskKind::Padding},
                                                              {"explicit", CaptureMaskKind::Explicit}};
const std::pair<const char*, CaptureBetweenKind> kBetweenKinds[] = {
    {"none", CaptureBetweenKind::None},       {"crop", CaptureBetweenKind::Crop},
    {"slice", CaptureBetweenKind::Slice},     {"reset", CaptureBetweenKind::Reset},
    {"overwrite", CaptureBetweenKind::Overwrite}, {"roll", CaptureBetweenKind::Roll},
    {"replace", CaptureBetweenKind::Replace}};
const std::pair<const char*, CaptureLogitsMode> kLogitsModes[] = {{"full", CaptureLogitsMode::Full},
                                                                  {"top_k", CaptureLogitsMode::TopK}};

std::optional<int64_t> optionalInteger(const std::string& path, const std::string& field, const Json& value,
                                       int64_t min, int64_t max) {
  if (value.is_null()) return std::nullopt;
  return jsonInteger(value, path, field, min, max);
}

double finiteNumber(const std::string& path, const std::string& field, const Json& value) {
  if (!value.is_number() || !std::isfinite(value.get<double>()))
    fail(path, field + " must be a finite number, got " + jsonSnippet(value));
  return value.get<double>();
}

CaptureModelConfig parseConfig(const std::string& path, const std::string& what, const Json& config) {
  requireObject(path, what, config);
  constexpr int64_t kMaxDimension = int64_t{1} << 30;
  CaptureModelConfig out;
  const Json& model_type = member(config, "model_type");
  if (!model_type.is_null()) out.model_type = boundedText(path, what + ".model_type", model_type);
  auto dimension = [&](const char* key, int64_t max) {
    return optionalInteger(path, what + "." + key, member(config, key), 1, max);
  };
  out.num_hidden_layers = dimension("num_hidden_layers", kMaxDimension);
  out.num_attention_heads = dimension("num_attention_heads", kMaxDimension);
  out.num_key_value_heads = dimension("num_key_value_heads", kMaxDimension);
  out.head_dim = dimension("head_dim", kMaxDimension);
  out.hidden_size = dimension("hidden_size", kMaxDimension);
  // vocab_size bounds token ids and logits widths, so it obeys the width limit.
  out.vocab_size = dimension("vocab_size", limits::kMaxLogitsWidth);
  out.sliding_window = dimension("sliding_window", kMaxDimension);
  const Json& sliding = member(config, "sliding_layers");
  if (!sliding.is_null()) {
    if (!sliding.is_array() || static_cast<int64_t>(sliding.size()) > limits::kMaxLayers)
      fail(path, what + ".sliding_layers must be null or a list of at most " + std::to_string(limits::kMaxLayers) +
                     " booleans, got " + jsonSnippet(sliding));
    std::vector<bool> flags;
    for (size_t i = 0; i < sliding.size(); ++i) {
      if (!sliding[i].is_boolean())
        fail(path, what + ".sliding_layers[" + std::to_string(i) + "] must be a boolean, got " +
                       jsonSnippet(sliding[i]));
      flags.push_back(sliding[i].get<bool>());
    }
    out.sliding_layers = std::move(flags);
  }
  return out;
}

std::optional<CaptureFingerprint> parseFingerprint(const std::string& path, const std::string& what,
                                                   const Json& value) {
  if (value.is_null()) return std::nullopt;
  requireObject(path, what, value);
  CaptureFingerprint out;
  out.tensor = boundedText(path, what + ".tensor", required(path, what, value, "tensor"));
  if (out.tensor != "input_embeddings")
    fail(path, what + ".tensor must be \"input_embeddings\", got " + jsonSnippet(value["tensor"]));
  out.shape = boundedIntegers(path, what + ".shape", required(path, what, value, "shape"), 2, 1,
                              std::numeric_limits<int64_t>::max());
  if (out.shape.size() != 2) fail(path, what + ".shape must be [vocab, hidden], got " + jsonSnippet(value["shape"]));
  out.sum = finiteNumber(path, what + ".sum", required(path, what, value, "sum"));
  out.sum_squares = finiteNumber(path, what + ".sum_squares", required(path, what, value, "sum_squares"));
  if (out.sum_squares < 0) fail(path, what + ".sum_squares must not be negative");
  return out;
}

CaptureModel parseModel(const std::string& path, CaptureRole role, const Json& value) {
  const std::string what = std::string("models.") + captureRoleName(role);
  requireObject(path, what, value);
  CaptureModel out;
  out.role = role;
  out.name_or_path = boundedText(path, what + ".name_or_path", required(path, what, value, "name_or_path"));
  out.config = parseConfig(path, what + ".config", required(path, what, value, "config"));
  out.fingerprint = parseFingerprint(path, what + ".fingerprint", member(value, "fingerprint"));
  out.layers = jsonInteger(required(path, what, value, "layers"), path, what + ".layers", 0, limits::kMaxLayers);
  out.calls = jsonInteger(required(path, what, value, "calls"), path, what + ".calls", 0, limits::kMaxCalls);
  return out;
}

int64_t vocabUpperBound(const CaptureManifest& manifest, CaptureRole role) {
  const CaptureModel* model = manifest.model(role);
  // Without a vocab_size, the largest one the format allows (an id past it
  // fits no embedding and no logits row).
  if (model == nullptr || !model->config.vocab_size) return limits::kMaxLogitsWidth - 1;
  return *model->config.vocab_size - 1;
}

// One sequence's runs of a layer; padding runs (first -2) only in version 2.
CaptureLayerState parseLayerRuns(const std::string& path, const std::string& what, const Json& runs,
                                 CaptureLayerKind kind, bool allow_padding) {
  if (!runs.is_array()) fail(path, what + " must be a list of runs [first, count], got " + jsonSnippet(runs));
  CaptureLayerState out;
  out.kind = kind;
  out.runs.reserve(runs.size());  // bounded by the manifest's value limit
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string run_what = what + " run " + std::to_string(r);
    const Json& run = runs[r];
    if (!run.is_array() || run.size() != 2)
      fail(path, run_what + " must be a pair [first, count], got " + jsonSnippet(run));
    CaptureSlotRun slot_run;
    slot_run.first = jsonInteger(run[0], path, run_what + " first", allow_padding ? kCapturePaddingSlot : -1,
                                 limits::kMaxRows - 1);
    slot_run.count = jsonInteger(run[1], path, run_what + " count", 1, limits::kMaxSlots);
    if (slot_run.first == -1 && kind == CaptureLayerKind::Append)
      fail(path, run_what + " holds " + std::to_string(slot_run.count) +
                     " empty slots in an append layer (empty slots exist only in static and ring layers)");
    out.slot_count += slot_run.count;  // each term <= 2^24: no overflow before the check below
    if (out.slot_count > limits::kMaxSlots)
      fail(path, what + " has more than " + std::to_string(limits::kMaxSlots) + " slots, the limit per layer");
    out.runs.push_back(slot_run);
  }
  return out;
}

// Version 2: layers[L] is one list of runs per sequence, every sequence with
// the same slot count, the batch's slots together within kMaxSlots.
CaptureLayerState parseBatchLayer(const std::string& path, const std::string& what, const Json& sequences,
                                  CaptureLayerKind kind, int64_t batch) {
  if (!sequences.is_array() || static_cast<int64_t>(sequences.size()) != batch)
    fail(path, what + " must be a list of " + std::to_string(batch) + " run lists (one per sequence of the batch), got " +
                   jsonSnippet(sequences));
  CaptureLayerState out;
  out.kind = kind;
  out.sequence_runs.reserve(static_cast<size_t>(batch));  // <= kMaxBatch
  for (int64_t b = 0; b < batch; ++b) {
    const std::string sequence_what = what + "[" + std::to_string(b) + "]";
    CaptureLayerState sequence = parseLayerRuns(path, sequence_what, sequences[static_cast<size_t>(b)], kind, true);
    if (b == 0) out.slot_count = sequence.slot_count;
    if (sequence.slot_count != out.slot_count)
      fail(path, sequence_what + " has " + std::to_string(sequence.slot_count) + " slots where sequence 0 has " +
                     std::to_string(out.slot_count) + " (a batched cache gives every sequence the same slots)");
    out.sequence_runs.push_back(std::move(sequence.runs));
  }
  if (out.slot_count * batch > limits::kMaxSlots)  // both factors bounded: no overflow
    fail(path, what + " has " + std::to_string(out.slot_count) + " slots for each of " + std::to_string(batch) +
                   " sequences, more than " + std::to_string(limits::kMaxSlots) + " in all, the limit per layer");
  out.runs = out.sequence_runs.front();
  return out;
}

// Version 2: `field` is a list of B lists of n integers in [min, max], B * n
// within kMaxInputs; n is the first row's length unless `n` is already set.
std::vector<std::vector<int64_t>> batchRows(const std::string& path, const std::string& field, const Json& value,
                                            int64_t batch, int64_t& n, int64_t min, int64_t max) {
  if (!value.is_array() || static_cast<int64_t>(value.size()) != batch)
    fail(path, field + " must be a list of " + std::to_string(batch) + " lists (one per sequence of the batch), got " +
                   jsonSnippet(value));
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(static_cast<size_t>(batch));  // <= kMaxBatch
  for (int64_t b = 0; b < batch; ++b) {
    const std::string row_field = field + "[" + std::to_string(b) + "]";
    const int64_t limit = n > 0 ? n : limits::kMaxInputs / batch;
    rows.push_back(boundedIntegers(path, row_field, value[static_cast<size_t>(b)], limit, min, max));
    if (n == 0) n = static_cast<int64_t>(rows.back().size());
    if (static_cast<int64_t>(rows.back().size()) != n)
      fail(path, row_field + " has " + std::to_string(rows.back().size()) + " entries where the call has " +
                     std::to_string(n) + " inputs per sequence");
  }
  return rows;
}

}  // namespace

Json parseCaptureMetadata(const std::string& path, const std::map<std::string, std::string>& metadata) {
  auto value = [&](const char* key) -> const std::string& {
    const auto it = metadata.find(key);
    if (it == metadata.end()) fail(path, std::string("not a kvscope capture: __metadata__ has no '") + key + "'");
    return it->second;
  };
  if (value("format") != "kvscope-capture")
    fail(path, "not a kvscope capture: __metadata__.format is '" + value("format").substr(0, 60) + "'");
  const std::string& metadata_version = value("version");
  if (metadata_version != "1" && metadata_version != "2" && metadata_version != "3")
    fail(path, "unsupported capture version '" + metadata_version.substr(0, 60) +
                   "' in __metadata__ (this reader reads 1, 2 and 3)");
  Json manifest = parseJsonWithLimits(value("kvscope_capture"), path + ": __metadata__.kvscope_capture",
                                      capture_limits::kManifestJsonLimits);
  requireObject(path, "the manifest", manifest);
  const Json& format = member(manifest, "format");
  if (format != "kvscope-capture") fail(path, "manifest format must be \"kvscope-capture\", got " + jsonSnippet(format));
  const Json& version = member(manifest, "version");
  if (!version.is_number_integer() || version.get<int64_t>() < 1 || version.get<int64_t>() > 3)
    fail(path, "unsupported manifest version " + jsonSnippet(version) + " (this reader reads 1, 2 and 3)");
  if (std::to_string(version.get<int64_t>()) != metadata_version)
    fail(path, "manifest version " + jsonSnippet(version) + " but __metadata__.version '" + metadata_version + "'");
  return manifest;
}

void parseManifestHead(const std::string& path, const Json& manifest, CaptureManifest& out) {
  out.version = member(manifest, "version").get<int64_t>();  // 1, 2 or 3, checked by parseCaptureMetadata
  if (out.version >= 2)  // version 3 keeps version 2's batch layout
    out.batch = jsonInteger(required(path, "the manifest", manifest, "batch"), path, "batch", 1, limits::kMaxBatch);
  const Json& logits = required(path, "the manifest", manifest, "logits");
  requireObject(path, "logits", logits);
  out.logits_mode = parseName(path, "logits.mode", required(path, "logits", logits, "mode"), kLogitsModes);
  if (out.logits_mode == CaptureLogitsMode::TopK)
    out.top_k = jsonInteger(required(path, "logits", logits, "k"), path, "logits.k", 1, limits::kMaxTopK);

  const Json& engine = required(path, "the manifest", manifest, "engine");
  requireObject(path, "engine", engine);
  out.engine_name = boundedText(path, "engine.name", required(path, "engine", engine, "name"));
  out.recorder = boundedText(path, "engine.recorder", required(path, "engine", engine, "recorder"));

  const Json& complete = required(path, "the manifest", manifest, "complete");
  if (!complete.is_boolean()) fail(path, "complete must be true or false, got " + jsonSnippet(complete));
  out.complete = complete.get<bool>();

  const Json& committed = member(manifest, "committed");
  if (committed.is_null()) return;
  if (out.version == 1) {
    out.committed = boundedIntegers(path, "committed", committed, limits::kMaxCommitted, 0,
                                    limits::kMaxLogitsWidth - 1);
    out.batch_committed.emplace(1, *out.committed);
    return;
  }
  if (!committed.is_array() || static_cast<int64_t>(committed.size()) != out.batch)
    fail(path, "committed must be null or a list of " + std::to_string(out.batch) +
                   " lists (one per sequence of the batch), got " + jsonSnippet(committed));
  std::vector<std::vector<int64_t>> sequences;
  sequences.reserve(committed.size());  // <= kMaxBatch
  int64_t remaining = limits::kMaxCommitted;  // for all sequences together
  for (size_t b = 0; b < committed.size(); ++b) {
    sequences.push_back(boundedIntegers(path, "committed[" + std::to_string(b) + "]", committed[b], remaining, 0,
                                        limits::kMaxLogitsWidth - 1));
    remaining -= static_cast<int64_t>(sequences.back().size());
  }
  out.committed = sequences.front();
  out.batch_committed = std::move(sequences);
}

void parseModels(const std::string& path, const Json& manifest, CaptureManifest& out) {
  const Json& models = required(path, "the manifest", manifest, "models");
  requireObject(path, "models", models);
  for (auto it = models.begin(); it != models.end(); ++it) {
    const CaptureRole role = parseName(path, "models key", Json(it.key()), kRoles);
    out.models[static_cast<int>(role)] = parseModel(path, role, it.value());
  }
  if (!out.model(CaptureRole::Target)) fail(path, "models has no 'target'");
  if (out.batch_committed) {
    const int64_t max_id = vocabUpperBound(out, CaptureRole::Target);
    for (size_t b = 0; b < out.batch_committed->size(); ++b) {
      const auto& sequence = (*out.batch_committed)[b];
      const std::string field = out.version == 1 ? "committed" : "committed[" + std::to_string(b) + "]";
      for (size_t i = 0; i < sequence.size(); ++i)
        if (sequence[i] > max_id)
          fail(path, field + "[" + std::to_string(i) + "] = " + std::to_string(sequence[i]) +
                         " is outside the target's vocab_size " + std::to_string(max_id + 1));
    }
  }
}

const Json& captureCallsArray(const std::string& path, const Json& manifest) {
  const Json& calls = required(path, "the manifest", manifest, "calls");
  if (!calls.is_array()) fail(path, "calls must be a list, got " + jsonSnippet(calls));
  if (static_cast<int64_t>(calls.size()) > limits::kMaxCalls)
    fail(path, "calls has " + std::to_string(calls.size()) + " entries, the limit is " +
                   std::to_string(limits::kMaxCalls));
  return calls;
}

std::string describeCall(size_t position, const CaptureCall& call) {
  return "call " + std::to_string(position) + " (" + captureRoleName(call.role) + " index " +
         std::to_string(call.index) + ")";
}

CaptureCall parseCallHead(const std::string& path, const Json& value, size_t position,
                          const CaptureManifest& manifest, std::array<int64_t, kCaptureRoles>& next_index) {
  const std::string at = "call " + std::to_string(position);
  requireObject(path, at, value);
  CaptureCall call;
  call.role = parseName(path, at + " role", required(path, at, value, "role"), kRoles);
  if (!manifest.model(call.role))
    fail(path, at + " has role '" + captureRoleName(call.role) + "' but models has no such entry");
  call.index = jsonInteger(required(path, at, value, "index"), path, at + " index", 0, limits::kMaxCalls);
  int64_t& expected = next_index[static_cast<int>(call.role)];
  if (call.index != expected)
    fail(path, at + " has " + captureRoleName(call.role) + " index " + std::to_string(call.index) + " where " +
                   std::to_string(expected) + " was due (a role's calls are numbered 0, 1, 2, ... in order)");
  ++expected;

  const std::string what = describeCall(position, call);
  if (manifest.version == 1) {
    call.input_ids = boundedIntegers(path, what + ": input_ids", required(path, what, value, "input_ids"),
                                     limits::kMaxInputs, 0, vocabUpperBound(manifest, call.role));
    if (call.input_ids.empty()) fail(path, what + ": input_ids is empty (a call has at least one input)");
    const auto n = static_cast<int64_t>(call.input_ids.size());
    call.positions = boundedIntegers(path, what + ": positions", required(path, what, value, "positions"), n, 0,
                                     limits::kMaxPosition);
    if (static_cast<int64_t>(call.positions.size()) != n)
      fail(path, what + ": " + std::to_string(call.positions.size()) + " positions for " + std::to_string(n) + " inputs");
    call.batch_input_ids.assign(1, call.input_ids);
    call.batch_positions.assign(1, call.positions);
  } else {
    int64_t inputs = 0;
    call.batch_input_ids = batchRows(path, what + ": input_ids", required(path, what, value, "input_ids"),
                                     manifest.batch, inputs, 0, vocabUpperBound(manifest, call.role));
    if (inputs == 0) fail(path, what + ": input_ids[0] is empty (a call has at least one input)");
    call.batch_positions = batchRows(path, what + ": positions", required(path, what, value, "positions"),
                                     manifest.batch, inputs, 0, limits::kMaxPosition);
    call.input_ids = call.batch_input_ids.front();
    call.positions = call.batch_positions.front();
  }
  const auto n = static_cast<int64_t>(call.input_ids.size());
  call.positions_source =
      parseName(path, what + ": positions_source", required(path, what, value, "positions_source"), kSources);
  const Json& cache_position = member(value, "cache_position");
  if (!cache_position.is_null()) {
    call.cache_position = boundedIntegers(path, what + ": cache_position", cache_position, n, 0,
                                          limits::kMaxPosition);
    if (static_cast<int64_t>(call.cache_position->size()) != n)
      fail(path, what + ": " + std::to_string(call.cache_position->size()) + " cache_position entries for " +
                     std::to_string(n) + " inputs");
  }
  if (call.positions_source == CapturePositionsSource::CachePosition)
    for (const auto& row : call.batch_positions)
      if (call.cache_position != row)
        fail(path, what + ": positions_source is cache_position but positions differ from cache_position");
  return call;
}

std::optional<CaptureCacheState> parseCacheState(const std::string& path, const std::string& what, const Json& call,
                                                 const char* field, const CaptureModel& model,
                                                 const CaptureManifest& manifest) {
  const int64_t layers = model.layers;
  const Json& value = member(call, field);
  if (value.is_null()) return std::nullopt;
  const std::string at = what + ": " + field;
  requireObject(path, at, value);
  CaptureCacheState state;
  state.cache = boundedText(path, at + ".cache", required(path, at, value, "cache"));
  const Json& kinds = required(path, at, value, "kinds");
  const Json& runs = required(path, at, value, "layers");
  for (const auto& [name, list] : {std::pair<const char*, const Json*>{"kinds", &kinds}, {"layers", &runs}})
    if (!list->is_array() || static_cast<int64_t>(list->size()) != layers)
      fail(path, at + "." + name + " must be a list of " + std::to_string(layers) + " entries (models." +
                     captureRoleName(model.role) + ".layers), got " +
                     jsonSnippet(*list));
  state.layers.reserve(static_cast<size_t>(layers));  // <= kMaxLayers
  int64_t state_slots = 0;  // across the layers and the batch's sequences
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string layer_what = at + ".layers[" + std::to_string(layer) + "]";
    const auto kind = parseName(path, at + ".kinds[" + std::to_string(layer) + "]", kinds[layer], kLayerKinds);
    if (manifest.version == 1) {
      state.layers.push_back(parseLayerRuns(path, layer_what, runs[layer], kind, false));
      state.layers.back().sequence_runs.assign(1, state.layers.back().runs);
    } else {
      state.layers.push_back(parseBatchLayer(path, layer_what, runs[layer], kind, manifest.batch));
    }
    state_slots += state.layers.back().slot_count * manifest.batch;  // each term <= 2^24, at most 1024 of them
    if (state_slots > limits::kMaxStateSlots)
      fail(path, layer_what + " brings the state's slots to " + std::to_string(state_slots) +
                     " across its layers" + (manifest.batch > 1 ? " and sequences" : "") + ", the limit is " +
                     std::to_string(limits::kMaxStateSlots) + " per state");
  }
  // Paged pools (version 3's optional `paged`, docs/capture-format-v3.md): checked against the runs just read.
  state.paged = capture_paged::parsePagedState(path, at, value, state, manifest);
  return state;
}

std::optional<CaptureBetween> parseBetween(const std::string& path, const std::string& what, const Json& call,
                                           int64_t index, int64_t layers) {
  const Json& value = member(call, "between");
  if (index == 0) {
    if (!value.is_null()) fail(path, what + ": between must be null for a role's first call");
    return std::nullopt;
  }
  const std::string at = what + ": between";
  requireObject(path, at, value);
  CaptureBetween out;
  out.kind = parseName(path, at + ".kind", required(path, at, value, "kind"), kBetweenKinds);
  out.layers = boundedIntegers(path, at + ".layers", required(path, at, value, "layers"), limits::kMaxLayers, 0,
                               layers - 1);
  out.what = boundedText(path, at + ".what", required(path, at, value, "what"));
  return out;
}

std::optional<CaptureMaskRef> parseMaskRef(const std::string& path, const std::string& what, const Json& call) {
  const Json& value = member(call, "attention_mask");
  if (value.is_null()) return std::nullopt;
  const std::string at = what + ": attention_mask";
  requireObject(path, at, value);
  CaptureMaskRef out;
  out.kind = parseName(path, at + ".kind", required(path, at, value, "kind"), kMaskKinds);
  out.tensor = boundedText(path, at + ".tensor", required(path, at, value, "tensor"));
  return out;
}

std::optional<CaptureLogitsRef> parseLogitsRef(const std::string& path, const std::string& what, const Json& call,
                                               int64_t inputs, const CaptureManifest& manifest) {
  const CaptureLogitsMode mode = manifest.logits_mode;
  const Json& value = member(call, "logits");
  if (value.is_null()) return std::nullopt;
  const std::string at = what + ": logits";
  requireObject(path, at, value);
  CaptureLogitsRef out;
  out.rows = jsonInteger(required(path, at, value, "rows"), path, at + ".rows", 0, inputs);
  const Json& tensors = required(path, at, value, "tensors");
  requireObject(path, at + ".tensors", tensors);
  const bool full = mode == CaptureLogitsMode::Full;
  size_t expected_names = full ? 1 : 3;
  auto name = [&](const char* key) {
    return boundedText(path, at + ".tensors." + key, required(path, at + ".tensors", tensors, key));
  };
  if (full) {
    out.logits = name("logits");
  } else {
    out.top_ids = name("top_ids");
    out.top_values = name("top_values");
    out.lse = name("lse");
  }
  if (tensors.contains("reference")) {  // the engine's own uncached forward (version 3)
    if (manifest.version < 3)
      fail(path, at + ".tensors.reference is a version 3 field; this file is version " + std::to_string(manifest.version));
    out.reference = name("reference");
    ++expected_names;
  }
  if (tensors.size() != expected_names)
    fail(path, at + ".tensors must name exactly " +
                   (full ? std::string("logits") : std::string("top_ids, top_values and lse")) +
                   " in logits mode " + (full ? "full" : "top_k") + " (and, in version 3, reference), got " +
                   jsonSnippet(tensors));
  return out;
}

void checkCallCounts(const std::string& path, const CaptureManifest& manifest,
                     const std::array<int64_t, kCaptureRoles>& next_index) {
  for (int role = 0; role < kCaptureRoles; ++role) {
    const CaptureModel* model = manifest.model(static_cast<CaptureRole>(role));
    if (model != nullptr && model->calls != next_index[role])
      fail(path, std::string("models.") + captureRoleName(model->role) + ".calls is " + std::to_string(model->calls) +
                     " but calls holds " + std::to_string(next_index[role]) + " calls of that role");
  }
}

}  // namespace kvscope
