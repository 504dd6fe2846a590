#include "core/check/capture_writer.h"

#include <torch/types.h>

#include <algorithm>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/capture/capture_change.h"
#include "core/check/capture_models.h"
#include "core/error.h"
#include "core/model/safetensors.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;

// Row ids of one role: per layer, the ledger entries in the order first met
// (row id = index), so each row is stored once.
class RowIds {
 public:
  explicit RowIds(int64_t layers) : entries_(static_cast<size_t>(layers)), ids_(static_cast<size_t>(layers)) {}

  int64_t idOf(int64_t layer, int64_t entry) {
    auto& ids = ids_[static_cast<size_t>(layer)];
    const auto it = ids.find(entry);
    if (it != ids.end()) return it->second;
    auto& entries = entries_[static_cast<size_t>(layer)];
    ids.emplace(entry, static_cast<int64_t>(entries.size()));
    entries.push_back(entry);
    return static_cast<int64_t>(entries.size()) - 1;
  }
  const std::vector<int64_t>& entries(int64_t layer) const { return entries_[static_cast<size_t>(layer)]; }
  int64_t layers() const { return static_cast<int64_t>(entries_.size()); }

 private:
  std::vector<std::vector<int64_t>> entries_;
  std::vector<std::map<int64_t, int64_t>> ids_;
};

const char* roleName(CacheRole role) { return role == CacheRole::Target ? "target" : "drafter"; }

// One layer's rows as runs [first, count] of consecutive row ids.
Json runsOf(const std::vector<int64_t>& ids) {
  Json runs = Json::array();
  for (size_t i = 0; i < ids.size();) {
    size_t j = i + 1;
    while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    runs.push_back({ids[i], static_cast<int64_t>(j - i)});
    i = j;
  }
  return runs;
}

std::vector<std::vector<int64_t>> idsOf(const CacheLayout& layout, RowIds& rows) {
  std::vector<std::vector<int64_t>> ids(layout.layers.size());
  for (size_t l = 0; l < layout.layers.size(); ++l) {
    for (int64_t entry : layout.layers[l]) ids[l].push_back(rows.idOf(static_cast<int64_t>(l), entry));
  }
  return ids;
}

Json stateOf(const std::vector<std::vector<int64_t>>& ids) {
  Json layers = Json::array();
  for (const auto& layer : ids) layers.push_back(runsOf(layer));
  return {{"cache", "kvscope KvCache"}, {"kinds", Json(std::vector<std::string>(ids.size(), "append"))},
          {"layers", layers}};
}

Json configOf(const CaptureModelConfig& c) {
  Json config = {{"model_type", *c.model_type},          {"num_hidden_layers", *c.num_hidden_layers},
                 {"num_attention_heads", *c.num_attention_heads}, {"num_key_value_heads", *c.num_key_value_heads},
                 {"head_dim", *c.head_dim},                {"hidden_size", *c.hidden_size},
                 {"vocab_size", *c.vocab_size},            {"sliding_window", nullptr},
                 {"sliding_layers", nullptr}};
  if (c.sliding_window) {
    config["sliding_window"] = *c.sliding_window;
    config["sliding_layers"] = *c.sliding_layers;
  }
  return config;
}

Json modelOf(const CaptureModel& m, int64_t calls) {
  Json fingerprint = nullptr;
  if (m.fingerprint) {
    fingerprint = {{"tensor", m.fingerprint->tensor}, {"shape", m.fingerprint->shape}, {"sum", m.fingerprint->sum},
                   {"sum_squares", m.fingerprint->sum_squares}};
  }
  return {{"name_or_path", m.name_or_path}, {"config", configOf(m.config)}, {"fingerprint", fingerprint},
          {"layers", m.layers}, {"calls", calls}};
}

class Writer {
 public:
  Writer(const SessionRecord& record, const CaptureModelSource& target, const CaptureModelSource& drafter)
      : record_(record), sources_{target, drafter} {}

  void write(const std::string& path, const std::string& engine) {
    refuseWhatTheFormatCannotHold();
    for (int r = 0; r < 2; ++r) {
      const int64_t layers = record_.layers(r == 0 ? CacheRole::Target : CacheRole::Drafter);
      rows_.emplace_back(layers);
      layouts_[r].layers.resize(static_cast<size_t>(layers));
    }
    for (const CacheEvent& e : record_.events.events()) addEvent(e);
    Json models = Json::object();
    for (int r = 0; r < 2; ++r) {
      if (!sources_[r].model) continue;
      const auto role = r == 0 ? CaptureRole::Target : CaptureRole::Drafter;
      models[r == 0 ? "target" : "drafter"] =
          modelOf(describeCaptureModel(role, sources_[r].name_or_path, *sources_[r].model), calls_[r]);
      addRowTensors(r);
    }
    const Json manifest = {{"format", "kvscope-capture"}, {"version", 1},
                           {"engine", {{"name", engine}, {"recorder", "kvscope-cli run --capture"}}},
                           {"complete", true},           {"logits", {{"mode", "full"}}},
                           {"models", models},           {"calls", calls_json_},
                           {"committed", record_.sequence}};
    std::vector<StWriteTensor> tensors;
    for (const Stored& s : stored_) {
      tensors.push_back({s.name, StDType::F32, std::vector<int64_t>(s.data.sizes().begin(), s.data.sizes().end()),
                         s.data.data_ptr(), static_cast<size_t>(s.data.nbytes())});
    }
    writeSafetensors(path, tensors, {{"format", "kvscope-capture"}, {"version", "1"}, {"kvscope_capture", manifest.dump()}});
  }

 private:
  struct Stored {
    std::string name;
    at::Tensor data;  // float32, contiguous
  };

  void refuseWhatTheFormatCannotHold() const {
    if (!record_.use_cache) throw Error("a capture records the KV caches: this session ran without them (--cache on)");
    for (const CacheEvent& e : record_.events.events()) {
      if (e.masksRows()) {
        throw Error("a capture cannot hold an eviction policy's masks (rows hidden per kv head, not removed): run without "
                    "--evict to write a capture");
      }
    }
    if (!sources_[0].model) throw Error("a capture needs the target model");
    if (record_.drafter_layers > 0 && !sources_[1].model) throw Error("a capture needs the drafter model");
  }

  void addEvent(const CacheEvent& e) {
    const int r = e.cache == CacheRole::Target ? 0 : 1;
    if (e.kind != CacheEventKind::Append && e.kind != CacheEventKind::Refeed) {
      applyEvent(layouts_[r], e);  // between calls: seen in the next call's before state
      last_between_[r] = e.moment();
      return;
    }
    const auto before = idsOf(layouts_[r], rows_[r]);
    applyEvent(layouts_[r], e);
    const auto after = idsOf(layouts_[r], rows_[r]);
    addCall(r, e, before, after);
  }

  void addCall(int r, const CacheEvent& e, const std::vector<std::vector<int64_t>>& before,
               const std::vector<std::vector<int64_t>>& after) {
    // The inputs as fed: in position order (a fault may store them otherwise).
    std::vector<int64_t> written = e.written;
    std::stable_sort(written.begin(), written.end(), [&](int64_t a, int64_t b) {
      return record_.ledger.entry(a).position < record_.ledger.entry(b).position;
    });
    std::vector<std::pair<int64_t, int64_t>> fed = e.unwritten;  // (rotary position, token) once sorted
    for (auto& [token, position] : fed) std::swap(token, position);
    for (int64_t entry : written) fed.emplace_back(record_.ledger.entry(entry).rope_position, record_.ledger.entry(entry).token);
    std::stable_sort(fed.begin(), fed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<int64_t> ids, positions;
    for (const auto& [position, token] : fed) {
      ids.push_back(token);
      positions.push_back(position);
    }
    if (ids.empty()) return;  // a forward that wrote nothing leaves no call to check
    const int64_t index = calls_[r]++;
    Json call = {{"role", roleName(e.cache)}, {"index", index}, {"input_ids", ids}, {"positions", positions},
                 {"positions_source", "position_ids"}, {"cache_position", nullptr}, {"attention_mask", nullptr},
                 {"before", stateOf(before)}, {"between", nullptr}, {"after", stateOf(after)}, {"logits", nullptr}};
    if (index > 0) {
      call["between"] = {{"kind", captureBetweenKindName(deriveStateChange(last_after_[r], before))},
                         {"layers", Json::array()}, {"what", ""}};
    }
    last_after_[r] = after;
    // kvscope's own moments, for tests that compare check with diff (readers ignore unknown keys).
    call["kvscope"] = {{"round", e.round}, {"phase", phaseName(e.phase)}};
    if (last_between_[r]) {
      call["kvscope"]["between_round"] = last_between_[r]->round;
      call["kvscope"]["between_phase"] = phaseName(last_between_[r]->phase);
      last_between_[r].reset();
    }
    if (e.cache == CacheRole::Target && e.phase == Phase::Verify) addVerifyLogits(call, e.round, index, ids.size());
    calls_json_.push_back(std::move(call));
  }

  void addVerifyLogits(Json& call, int64_t round, int64_t index, size_t inputs) {
    const auto it = record_.verify.find(round);
    if (it == record_.verify.end() || !it->second.logits.defined() || it->second.logits_dropped) return;
    const at::Tensor logits = it->second.logits.to(torch::kFloat32).contiguous();  // [rows, vocab]
    if (logits.dim() != 2 || logits.size(0) > static_cast<int64_t>(inputs)) return;
    const std::string name = "target.call" + std::to_string(index) + ".logits";
    stored_.push_back({name, logits});
    call["logits"] = {{"rows", logits.size(0)}, {"tensors", {{"logits", name}}}};
  }

  void addRowTensors(int r) {
    const RowIds& rows = rows_[r];
    const std::string role = r == 0 ? "target" : "drafter";
    for (int64_t l = 0; l < rows.layers(); ++l) {
      std::vector<at::Tensor> keys, values;
      for (int64_t entry : rows.entries(l)) {
        const int64_t stored = record_.ledger.entry(entry).row;
        keys.push_back(record_.ledger.keys(stored)[l]);  // [kv_heads, head_dim]
        values.push_back(record_.ledger.values(stored)[l]);
      }
      const ModelConfig& config = sources_[r].model->config();
      at::Tensor k = keys.empty() ? torch::zeros({config.num_kv_heads, 0, config.head_dim})
                                  : torch::stack(keys, 1).contiguous();  // [kv_heads, n_rows, head_dim]
      at::Tensor v = values.empty() ? k.clone() : torch::stack(values, 1).contiguous();
      stored_.push_back({role + ".layer" + std::to_string(l) + ".keys", k.to(torch::kFloat32).contiguous()});
      stored_.push_back({role + ".layer" + std::to_string(l) + ".values", v.to(torch::kFloat32).contiguous()});
    }
  }

  const SessionRecord& record_;
  CaptureModelSource sources_[2];
  std::vector<RowIds> rows_;
  CacheLayout layouts_[2];
  std::vector<std::vector<int64_t>> last_after_[2];
  std::optional<Moment> last_between_[2];  // the last change between calls since the role's previous call
  int64_t calls_[2] = {0, 0};
  Json calls_json_ = Json::array();
  std::vector<Stored> stored_;
};

}  // namespace

void writeSessionCapture(const std::string& path, const SessionRecord& record, const CaptureModelSource& target,
                         const CaptureModelSource& drafter, const std::string& engine) {
  Writer(record, target, drafter).write(path, engine);
}

}  // namespace kvscope
