#pragma once
// The manifest of a .kvcapture file (docs/capture-format.md, sections 2-6)
// as plain structs, torch-free. Everything here has been validated by
// CaptureFile::open: row ids are in range, tensors exist with the right
// dtypes and shapes, call indices run 0, 1, 2, ... per role.
//
// Version 2 captures hold a batch of B sequences (docs/capture-format-v2.md).
// Every field of version 1 keeps its name and, for B = 1, its
// meaning; for B > 1 it holds sequence 0's part, and the fields named batch_*
// or sequence_* hold every sequence's (they are filled for version 1 too,
// with its one sequence).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvscope {

enum class CaptureRole { Target, Drafter };
constexpr int kCaptureRoles = 2;  // CaptureRole's values, usable as an array index
enum class CaptureLogitsMode { Full, TopK };
enum class CaptureLayerKind { Append, Static, Ring };
enum class CapturePositionsSource { PositionIds, CachePosition, PastLength };
enum class CaptureMaskKind { Padding, Explicit };
enum class CaptureBetweenKind { None, Crop, Slice, Reset, Overwrite, Roll, Replace };

// Names as the format writes them ("target", "static", "past_length", ...).
const char* captureRoleName(CaptureRole role);
const char* captureLayerKindName(CaptureLayerKind kind);
const char* capturePositionsSourceName(CapturePositionsSource source);
const char* captureMaskKindName(CaptureMaskKind kind);
const char* captureBetweenKindName(CaptureBetweenKind kind);

// The subset of the Hugging Face config the engine ran with; nullopt where
// the capture holds null.
struct CaptureModelConfig {
  std::optional<std::string> model_type;
  std::optional<int64_t> num_hidden_layers;
  std::optional<int64_t> num_attention_heads;
  std::optional<int64_t> num_key_value_heads;
  std::optional<int64_t> head_dim;
  std::optional<int64_t> hidden_size;
  std::optional<int64_t> vocab_size;
  std::optional<int64_t> sliding_window;
  std::optional<std::vector<bool>> sliding_layers;
};

// Sum and sum of squares of the input embedding matrix, to match checkpoints.
struct CaptureFingerprint {
  std::string tensor;  // "input_embeddings"
  std::vector<int64_t> shape;
  double sum = 0;
  double sum_squares = 0;
};

struct CaptureModel {
  CaptureRole role = CaptureRole::Target;
  std::string name_or_path;
  CaptureModelConfig config;
  std::optional<CaptureFingerprint> fingerprint;
  int64_t layers = 0;
  int64_t calls = 0;
};

// The `first` of a run of padding slots (version 2 only): slots the call's
// 2-D attention mask masks for that sequence; their K/V are not rows of it.
constexpr int64_t kCapturePaddingSlot = -2;

// `count` consecutive slots holding row ids first .. first + count - 1, or
// `count` empty slots when first == -1, or `count` padding slots when
// first == kCapturePaddingSlot (version 2).
struct CaptureSlotRun {
  int64_t first = -1;
  int64_t count = 0;
};

// One layer of a cache state, kept as the runs the file holds: a run of
// 2^24 empty slots is 12 bytes of JSON, so decoding every state of a hostile
// file up front would be an amplification; slotRows() decodes one layer.
struct CaptureLayerState {
  CaptureLayerKind kind = CaptureLayerKind::Append;
  std::vector<CaptureSlotRun> runs;  // sequence 0's
  int64_t slot_count = 0;            // the sum of the runs' counts (the same for every sequence)
  // Every sequence's runs, sequence_runs[0] == runs (one entry for version 1).
  std::vector<std::vector<CaptureSlotRun>> sequence_runs;
  // The row id in each slot of sequence 0, -1 for an empty slot, -2 for padding.
  std::vector<int64_t> slotRows() const;
  // The same for sequence `sequence` (< sequence_runs.size()).
  std::vector<int64_t> sequenceSlotRows(size_t sequence) const;
};

// Format version 3's `paged` of a state (docs/capture-format-v3.md, "Paged
// pools"): a paged engine's pool and where each slot's row lives in it.
struct CapturePagedState {
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  // [layer][sequence]: runs of pool slots (block * block_size + offset), one
  // per slot of the layer; first == kCapturePaddingSlot on padding.
  std::vector<std::vector<std::vector<CaptureSlotRun>>> layers;
  std::optional<std::vector<CaptureSlotRun>> free;  // runs of free block ids, when the engine gave its free list
  // The pool slot of each slot of `layer` for `sequence`, -2 on padding (capture_paged.cpp).
  std::vector<int64_t> poolSlots(size_t layer, size_t sequence) const;
  bool blockFree(int64_t block) const;
};

struct CaptureCacheState {
  std::string cache;  // the cache's class name, informational
  std::vector<CaptureLayerState> layers;
  std::optional<CapturePagedState> paged;  // version 3, a paged engine's pool (docs/capture-format-v3.md)
};

// The recorder's hint of what changed since the role's previous call.
// Informational: readers derive the change from the two states.
struct CaptureBetween {
  CaptureBetweenKind kind = CaptureBetweenKind::None;
  std::vector<int64_t> layers;
  std::string what;
};

struct CaptureMaskRef {
  CaptureMaskKind kind = CaptureMaskKind::Explicit;
  std::string tensor;  // BOOL [n, K] (explicit) or [1, K] (padding); version 2: [B, n, K] or [B, K]
};

// Logits of the call's last `rows` inputs: `logits` in full mode, the other
// three in top-k mode (the unused names are empty). Version 2 tensors have a
// leading batch axis: [B, rows, V], [B, rows, k'], [B, rows].
struct CaptureLogitsRef {
  int64_t rows = 0;
  std::string logits;      // F32 [rows, V]
  std::string top_ids;     // I32 [rows, k']
  std::string top_values;  // F32 [rows, k']
  std::string lse;         // F32 [rows]
  // Version 3, optional: the engine's own forward of the same inputs without
  // a cache, over the context its rows claim (the recorder's reference="self"),
  // F32 [rows, V] in full; what a check without kvscope's model compares with.
  std::string reference;
};

// Format version 3's recurrent state of a hybrid model (docs/capture-format-v3.md,
// "Recurrent state"): per recurrent layer a conv and an SSM state, each named by
// an id of the manifest's recurrent_states (capture_recurrent.h).
enum class CaptureStateKind { Conv, Ssm };

struct CaptureStateRef {
  int64_t layer = 0;
  CaptureStateKind kind = CaptureStateKind::Conv;
  int64_t id = 0;
};

// What a state is: computed by `call` (that role's index) after its input
// `input`, at position `after_position`, from state `from`; nullopt for a state
// no recorded call computed (the initial state, or one only seen).
struct CaptureRecurrentState {
  int64_t layer = 0;
  CaptureStateKind kind = CaptureStateKind::Conv;
  std::optional<int64_t> call, input, from, after_position;
};

struct CaptureCallRecurrent {
  // [sequence][entry], sorted as written; nullopt when the field is null.
  std::optional<std::vector<std::vector<CaptureStateRef>>> before, after;
  // [sequence][entry]: the state after each input, one id per input (optional).
  std::vector<std::vector<std::pair<CaptureStateRef, std::vector<int64_t>>>> intermediate;
};

struct CaptureCall {
  CaptureRole role = CaptureRole::Target;
  int64_t index = 0;  // that role's forward count from 0
  std::vector<int64_t> input_ids;  // sequence 0's
  std::vector<int64_t> positions;  // sequence 0's
  // Per sequence of the batch, [B][n] (one entry for version 1).
  std::vector<std::vector<int64_t>> batch_input_ids;
  std::vector<std::vector<int64_t>> batch_positions;
  CapturePositionsSource positions_source = CapturePositionsSource::PastLength;
  std::optional<std::vector<int64_t>> cache_position;
  std::optional<CaptureMaskRef> attention_mask;
  std::optional<CaptureCacheState> before;
  std::optional<CaptureBetween> between;  // nullopt for index 0
  std::optional<CaptureCacheState> after;
  std::optional<CaptureLogitsRef> logits;
  std::optional<CaptureCallRecurrent> recurrent;  // version 3, a hybrid model's recurrent states
};

// One rank's part of a tensor-parallel run (version 3,
// docs/capture-format-v3.md): its rows hold KV heads [first, first + count)
// of the model's num_key_value_heads; the calls, inputs and logits are the
// run's own, the same on every rank.
struct CaptureShard {
  int64_t rank = 0;
  int64_t ranks = 1;
  std::array<int64_t, kCaptureRoles> kv_head_first{0, 0};  // per CaptureRole
  std::array<int64_t, kCaptureRoles> kv_head_count{0, 0};  // 0 for a role the run does not have
};

struct CaptureManifest {
  int64_t version = 1;  // 1; 2 (batched); 3 (version 2's layout plus optional fields)
  int64_t batch = 1;    // B, the sequences every call carries (1 for version 1)
  std::string engine_name;
  std::string recorder;
  bool complete = false;
  CaptureLogitsMode logits_mode = CaptureLogitsMode::Full;
  int64_t top_k = 0;  // K in top-k mode, 0 in full mode
  std::optional<CaptureModel> models[kCaptureRoles];  // indexed by CaptureRole; target always set
  std::vector<CaptureCall> calls;                     // in run order across both roles
  std::optional<std::vector<int64_t>> committed;  // sequence 0's
  // Every sequence's committed ids, prompt included, no padding (one entry for version 1).
  std::optional<std::vector<std::vector<int64_t>>> batch_committed;
  bool has_padding_slots = false;  // some state holds a padding run
  std::optional<CaptureShard> shard;  // a tensor-parallel rank's capture (version 3)
  // Version 3's recurrent_states: per CaptureRole, state id -> what it is (capture_recurrent.h).
  std::array<std::vector<CaptureRecurrentState>, kCaptureRoles> recurrent_states;

  const CaptureModel* model(CaptureRole role) const;
};

// The call of `role` whose index is `index`, or null when the manifest has none.
const CaptureCall* findCall(const CaptureManifest& manifest, CaptureRole role, int64_t index);

}  // namespace kvscope
