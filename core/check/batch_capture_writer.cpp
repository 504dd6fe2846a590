#include "core/check/batch_capture_writer.h"

#include <torch/types.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/cache/block_table.h"
#include "core/cache/pool_picture.h"
#include "core/decode/batch_session.h"
#include "core/capture/capture_change.h"
#include "core/check/capture_models.h"
#include "core/error.h"

namespace kvscope {
namespace {

using namespace capture_writing;

// A batch as version 2 (docs/capture-format-v2.md), or as version 3 when it
// is paged (docs/capture-format-v3.md, "Paged pools": each state's pool).
// kvscope's batch is ragged: each joined forward feeds each sequence its own
// number of inputs at its own positions, and sequences that finished are not
// in it. The format's
// call is B lists of n ids, so a joined forward is written as n = the widest
// sequence's inputs; a narrower sequence's missing inputs are pads before its
// own (left padding) whose slots are padding (-2), never stored; a sequence
// the forward did not carry holds only padding (its view leaves the call
// out). Each sequence's own slots sit after padding that evens the slot
// counts. A joined forward is the k-th forward of a role in a round's phase,
// as the ForwardBatcher joins them (core/decode/forward_batcher.h).
class BatchWriter {
 public:
  BatchWriter(std::vector<const SessionRecord*> records, const CaptureModelSource& target,
              const CaptureModelSource& drafter, std::vector<SequencePoolPictures> pools)
      : records_(std::move(records)), sources_{target, drafter}, pools_(std::move(pools)) {}

  void write(const std::string& path, const std::string& engine) {
    for (const SessionRecord* record : records_) refuseWhatACaptureCannotHold(*record, sources_[0], sources_[1]);
    for (int r = 0; r < 2; ++r) rows_.emplace_back(records_.front()->layers(r == 0 ? CacheRole::Target : CacheRole::Drafter));
    for (size_t b = 0; b < records_.size(); ++b) collect(b);
    paged_ = pagedBatch();
    for (auto& [key, forward] : forwards_) addCall(key, forward);
    Json models = Json::object();
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (int r = 0; r < 2; ++r) {
      if (!sources_[r].model) continue;
      const auto role = r == 0 ? CaptureRole::Target : CaptureRole::Drafter;
      models[r == 0 ? "target" : "drafter"] =
          modelOf(describeCaptureModel(role, sources_[r].name_or_path, *sources_[r].model), calls_[r]);
      storeRowTensors(rows_[r], r == 0 ? "target" : "drafter", sources_[r].model->config(), records_, tensors);
    }
    for (auto& logits : logits_) tensors.push_back(std::move(logits));
    Json committed = Json::array();
    for (const SessionRecord* record : records_) committed.push_back(record->sequence);
    const int version = paged_ ? 3 : 2;
    const Json manifest = {{"format", "kvscope-capture"}, {"version", version},
                           {"batch", records_.size()},
                           {"engine", {{"name", engine}, {"recorder", "kvscope-cli run --capture"}}},
                           {"complete", true},           {"logits", {{"mode", "full"}}},
                           {"models", models},           {"calls", calls_json_},
                           {"committed", committed}};
    writeCaptureFile(path, tensors, version, manifest);
  }

 private:
  // One sequence's part of a joined forward (row ids, its own slots only).
  struct Part {
    std::vector<int64_t> ids, positions;
    std::vector<std::vector<int64_t>> before, after;
    std::optional<Moment> between;  // the last change between this role's calls of the sequence
    std::optional<PoolPicture> pool_before, pool_after;  // a paged cache's table and pool around the forward
  };
  // (round, phase, role, k): the k-th forward of a role in a round's phase.
  using Key = std::tuple<int64_t, int, int, int64_t>;
  struct Forward {
    std::map<size_t, Part> parts;  // by sequence
  };

  // Sequence b's forwards from its own event log, each under its joined forward's key.
  void collect(size_t b) {
    const SessionRecord& record = *records_[b];
    CacheLayout layouts[2];
    for (int r = 0; r < 2; ++r) layouts[r].layers.resize(static_cast<size_t>(rows_[static_cast<size_t>(r)].layers()));
    std::optional<Moment> between[2];
    std::map<Key, int64_t> count;  // forwards so far of (round, phase, role)
    const auto& events = record.events.events();
    for (size_t index = 0; index < events.size(); ++index) {
      const CacheEvent& e = events[index];
      const int r = e.cache == CacheRole::Target ? 0 : 1;
      if (e.kind != CacheEventKind::Append && e.kind != CacheEventKind::Refeed) {
        applyEvent(layouts[r], e);
        between[r] = e.moment();
        continue;
      }
      Part part;
      part.before = idsOf(layouts[r], rows_[static_cast<size_t>(r)], b);
      applyEvent(layouts[r], e);
      part.after = idsOf(layouts[r], rows_[static_cast<size_t>(r)], b);
      std::tie(part.ids, part.positions) = fedInputs(record, e);
      if (part.ids.empty()) continue;  // a forward that wrote nothing leaves no call to check
      part.between = between[r];
      between[r].reset();
      if (const PoolAroundForward* pool = poolAround(b, r, index)) {
        part.pool_before = pool->before;
        part.pool_after = pool->after;
      }
      const Key phase{e.round, static_cast<int>(e.phase), r, 0};
      const Key key{e.round, static_cast<int>(e.phase), r, count[phase]++};
      forwards_[key].parts.emplace(b, std::move(part));
    }
  }

  // The pool around sequence b's forward logged as event `index` of role r's
  // cache, when the batch is paged (pools_), else null.
  const PoolAroundForward* poolAround(size_t b, int r, size_t index) const {
    if (b >= pools_.size()) return nullptr;
    const ForwardPoolPictures* pictures = r == 0 ? pools_[b].target : pools_[b].drafter;
    if (pictures == nullptr) return nullptr;
    const auto it = pictures->find(index);
    return it == pictures->end() ? nullptr : &it->second;
  }

  // Whether the batch is paged: every forward then has its pool pictures, a
  // contiguous batch's none.
  bool pagedBatch() const {
    bool any = false, all = true;
    for (const auto& [key, forward] : forwards_) {
      for (const auto& [b, part] : forward.parts) {
        const bool pictured = part.pool_before && part.pool_after;
        any = any || pictured;
        all = all && pictured;
      }
    }
    if (any && !all) throw Error("a paged batch's capture needs every forward's pool picture: some forwards have none");
    return any;
  }

  // Sequence b's rows of layer l as a state lists them: row ids.
  static std::vector<int64_t> rowIdsOf(const Part& part, size_t l, bool after) { return (after ? part.after : part.before)[l]; }

  // The same rows' pool slots, read through the sequence's block table then.
  static std::vector<int64_t> poolSlotsOf(const Part& part, size_t l, bool after) {
    const PoolPicture& pool = *(after ? part.pool_after : part.pool_before);
    std::vector<int64_t> slots;
    const auto rows = static_cast<int64_t>((after ? part.after : part.before)[l].size());
    for (int64_t row = 0; row < rows; ++row) slots.push_back(pool.poolSlot(row));
    return slots;
  }

  // Layer l of every sequence, padded to one slot count: padding first, then
  // the sequence's rows (as `values` gives them), its inputs' rows last with
  // the missing inputs' padding just before them.
  template <class RowValues>
  std::vector<std::vector<int64_t>> paddedSlots(const Forward& forward, size_t l, int64_t width, bool after,
                                                RowValues values) const {
    std::vector<std::vector<int64_t>> slots(records_.size());
    size_t count = 0;
    for (const auto& [b, part] : forward.parts) {
      const std::vector<int64_t> own = values(part, l, after);
      const auto inputs = static_cast<int64_t>(part.ids.size());
      std::vector<int64_t>& s = slots[b];
      if (after) {
        const auto tail = std::min<int64_t>(inputs, static_cast<int64_t>(own.size()));
        s.assign(own.begin(), own.end() - tail);
        s.insert(s.end(), static_cast<size_t>(width - inputs), kCapturePaddingSlot);
        s.insert(s.end(), own.end() - tail, own.end());
      } else {
        s = own;
      }
      count = std::max(count, s.size());
    }
    for (auto& s : slots) s.insert(s.begin(), count - s.size(), kCapturePaddingSlot);
    return slots;
  }

  static Json runsPerSequence(const std::vector<std::vector<int64_t>>& slots) {
    Json layer = Json::array();
    for (const auto& s : slots) layer.push_back(padRunsOf(s));
    return layer;
  }

  // The pool around a joined forward. Lanes take turns in batch order
  // (core/decode/forward_batcher.h): the last sequence of the forward asks
  // for it just before it runs, the first one logs it right after.
  static const PoolPicture& joinedPool(const Forward& forward, bool after) {
    return after ? *forward.parts.begin()->second.pool_after : *forward.parts.rbegin()->second.pool_before;
  }

  // Version 3's `paged` of a state: every sequence's slots as pool slots, the free list.
  Json pagedJson(const Forward& forward, size_t layers, int64_t width, bool after) const {
    const PoolPicture& pool = joinedPool(forward, after);
    Json out = Json::array();
    for (size_t l = 0; l < layers; ++l) out.push_back(runsPerSequence(paddedSlots(forward, l, width, after, poolSlotsOf)));
    return {{"block_size", pool.block_size}, {"num_blocks", pool.num_blocks}, {"layers", out}, {"free", runsOf(pool.free)}};
  }

  static Json padRunsOf(const std::vector<int64_t>& slots) {
    Json runs = Json::array();
    for (size_t i = 0; i < slots.size();) {
      size_t j = i + 1;
      if (slots[i] == kCapturePaddingSlot) {
        while (j < slots.size() && slots[j] == kCapturePaddingSlot) ++j;
      } else {
        while (j < slots.size() && slots[j] == slots[j - 1] + 1) ++j;
      }
      runs.push_back({slots[i], static_cast<int64_t>(j - i)});
      i = j;
    }
    return runs;
  }

  Json stateJson(const Forward& forward, int r, int64_t width, bool after) const {
    const auto layers = static_cast<size_t>(rows_[static_cast<size_t>(r)].layers());
    Json out = Json::array();
    for (size_t l = 0; l < layers; ++l) out.push_back(runsPerSequence(paddedSlots(forward, l, width, after, rowIdsOf)));
    Json state = {{"cache", "kvscope KvCache"}, {"kinds", Json(std::vector<std::string>(layers, "append"))}, {"layers", out}};
    if (paged_) state["paged"] = pagedJson(forward, layers, width, after);
    return state;
  }

  void addCall(const Key& key, const Forward& forward) {
    const auto [round, phase, r, k] = key;
    int64_t width = 0;
    for (const auto& [b, part] : forward.parts) width = std::max<int64_t>(width, static_cast<int64_t>(part.ids.size()));
    Json ids = Json::array(), positions = Json::array();
    for (size_t b = 0; b < records_.size(); ++b) {
      const auto it = forward.parts.find(b);
      std::vector<int64_t> seq_ids(static_cast<size_t>(width), 0), seq_positions(static_cast<size_t>(width), 0);
      if (it != forward.parts.end()) {  // pads (token 0 at position 0) before the sequence's own inputs
        const Part& part = it->second;
        std::copy(part.ids.begin(), part.ids.end(), seq_ids.end() - static_cast<int64_t>(part.ids.size()));
        std::copy(part.positions.begin(), part.positions.end(), seq_positions.end() - static_cast<int64_t>(part.positions.size()));
      }
      ids.push_back(seq_ids);
      positions.push_back(seq_positions);
    }
    const Json between = betweenHint(forward, r);
    const int64_t index = calls_[r]++;
    Json call = {{"role", r == 0 ? "target" : "drafter"}, {"index", index}, {"input_ids", ids}, {"positions", positions},
                 {"positions_source", "position_ids"}, {"cache_position", nullptr}, {"attention_mask", nullptr},
                 {"before", stateJson(forward, r, width, false)}, {"between", nullptr},
                 {"after", stateJson(forward, r, width, true)}, {"logits", nullptr}};
    call["between"] = between;
    call["kvscope"] = {{"round", round}, {"phase", phaseName(static_cast<Phase>(phase))}};
    for (const auto& [b, part] : forward.parts) {
      if (!part.between) continue;
      call["kvscope"]["between_round"] = part.between->round;
      call["kvscope"]["between_phase"] = phaseName(part.between->phase);
      break;
    }
    if (r == 0 && static_cast<Phase>(phase) == Phase::Verify) addVerifyLogits(call, forward, round, index, width);
    for (const auto& [b, part] : forward.parts) last_after_[r][b] = part.after;
    calls_json_.push_back(std::move(call));
  }

  // The first sequence whose slots changed since its previous call of the
  // role names the kind; "none" when none changed; null at a role's first call.
  Json betweenHint(const Forward& forward, int r) const {
    if (calls_[r] == 0) return nullptr;
    for (const auto& [b, part] : forward.parts) {
      const auto it = last_after_[r].find(b);
      if (it == last_after_[r].end()) continue;
      const CaptureBetweenKind kind = deriveStateChange(it->second, part.before);
      if (kind == CaptureBetweenKind::None) continue;
      return {{"kind", captureBetweenKindName(kind)}, {"layers", Json::array()},
              {"what", "sequence " + std::to_string(b) + ": its cache changed"}};
    }
    return {{"kind", captureBetweenKindName(CaptureBetweenKind::None)}, {"layers", Json::array()}, {"what", ""}};
  }

  // [B, rows, vocab]: each sequence's verify logits on its own inputs (the
  // last rows), zeros for pads; left out when a sequence's logits do not
  // cover exactly its inputs.
  void addVerifyLogits(Json& call, const Forward& forward, int64_t round, int64_t index, int64_t width) {
    std::map<size_t, at::Tensor> rows;
    int64_t vocab = 0;
    for (const auto& [b, part] : forward.parts) {
      const auto it = records_[b]->verify.find(round);
      if (it == records_[b]->verify.end() || !it->second.logits.defined() || it->second.logits_dropped) return;
      const at::Tensor logits = it->second.logits.to(torch::kFloat32).contiguous();  // [rows, vocab]
      if (logits.dim() != 2 || logits.size(0) != static_cast<int64_t>(part.ids.size())) return;
      vocab = logits.size(1);
      rows[b] = logits;
    }
    at::Tensor all = torch::zeros({static_cast<int64_t>(records_.size()), width, vocab});  // [B, width, vocab]
    for (const auto& [b, logits] : rows) {
      all[static_cast<int64_t>(b)].narrow(0, width - logits.size(0), logits.size(0)).copy_(logits);
    }
    const std::string name = "target.call" + std::to_string(index) + ".logits";
    logits_.emplace_back(name, all.contiguous());
    call["logits"] = {{"rows", width}, {"tensors", {{"logits", name}}}};
  }

  std::vector<const SessionRecord*> records_;
  CaptureModelSource sources_[2];
  std::vector<SequencePoolPictures> pools_;
  std::vector<RowIds> rows_;
  std::map<Key, Forward> forwards_;
  std::map<size_t, std::vector<std::vector<int64_t>>> last_after_[2];
  int64_t calls_[2] = {0, 0};
  Json calls_json_ = Json::array();
  std::vector<std::pair<std::string, at::Tensor>> logits_;
  bool paged_ = false;
};

}  // namespace

void writeBatchCapture(const std::string& path, const std::vector<const SessionRecord*>& records,
                       const CaptureModelSource& target, const CaptureModelSource& drafter, const std::string& engine,
                       const std::vector<SequencePoolPictures>& pools) {
  if (records.empty()) throw Error("a batch capture needs at least one sequence");
  if (records.size() > 1024) throw Error("a capture holds at most 1024 sequences (docs/capture-format-v2.md)");
  if (!pools.empty() && pools.size() != records.size())
    throw Error("a paged batch's capture needs one set of pool pictures per sequence: " + std::to_string(pools.size()) +
                " for " + std::to_string(records.size()) + " sequences");
  BatchWriter(records, target, drafter, pools).write(path, engine);
}

std::vector<SequencePoolPictures> poolPicturesOf(const BatchSession& batch) {
  std::vector<SequencePoolPictures> pools;
  for (size_t b = 0; b < batch.size(); ++b) {
    const Session& session = batch.sequence(b);
    const auto picturesOf = [](const KvCache* cache) -> const ForwardPoolPictures* {
      return cache && cache->blockTable() ? &cache->blockTable()->forwardPictures() : nullptr;
    };
    pools.push_back({picturesOf(session.targetCache()), picturesOf(session.drafterCache())});
  }
  return pools;
}

}  // namespace kvscope
