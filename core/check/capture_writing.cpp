#include "core/check/capture_writing.h"

#include <torch/types.h>

#include <algorithm>

#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"

namespace kvscope::capture_writing {
namespace {

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

}  // namespace

int64_t RowIds::idOf(int64_t layer, int64_t entry, size_t sequence) {
  auto& ids = ids_[static_cast<size_t>(layer)];
  const Source source{sequence, entry};
  const auto it = ids.find(source);
  if (it != ids.end()) return it->second;
  auto& entries = entries_[static_cast<size_t>(layer)];
  ids.emplace(source, static_cast<int64_t>(entries.size()));
  entries.push_back(source);
  return static_cast<int64_t>(entries.size()) - 1;
}

const char* roleName(CacheRole role) { return role == CacheRole::Target ? "target" : "drafter"; }

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

std::vector<std::vector<int64_t>> idsOf(const CacheLayout& layout, RowIds& rows, size_t sequence) {
  std::vector<std::vector<int64_t>> ids(layout.layers.size());
  for (size_t l = 0; l < layout.layers.size(); ++l) {
    for (int64_t entry : layout.layers[l]) ids[l].push_back(rows.idOf(static_cast<int64_t>(l), entry, sequence));
  }
  return ids;
}

Json stateOf(const std::vector<std::vector<int64_t>>& ids) {
  Json layers = Json::array();
  for (const auto& layer : ids) layers.push_back(runsOf(layer));
  return {{"cache", "kvscope KvCache"}, {"kinds", Json(std::vector<std::string>(ids.size(), "append"))},
          {"layers", layers}};
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

std::pair<std::vector<int64_t>, std::vector<int64_t>> fedInputs(const SessionRecord& record, const CacheEvent& e) {
  std::vector<int64_t> written = e.written;
  std::stable_sort(written.begin(), written.end(), [&](int64_t a, int64_t b) {
    return record.ledger.entry(a).position < record.ledger.entry(b).position;
  });
  std::vector<std::pair<int64_t, int64_t>> fed = e.unwritten;  // (rotary position, token) once sorted
  for (auto& [token, position] : fed) std::swap(token, position);
  for (int64_t entry : written) fed.emplace_back(record.ledger.entry(entry).rope_position, record.ledger.entry(entry).token);
  std::stable_sort(fed.begin(), fed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int64_t> ids, positions;
  for (const auto& [position, token] : fed) {
    ids.push_back(token);
    positions.push_back(position);
  }
  return {ids, positions};
}

void storeRowTensors(const RowIds& rows, const std::string& role, const ModelConfig& config,
                     const std::vector<const SessionRecord*>& records, std::vector<std::pair<std::string, at::Tensor>>& out) {
  for (int64_t l = 0; l < rows.layers(); ++l) {
    std::vector<at::Tensor> keys, values;
    for (const RowIds::Source& source : rows.entries(l)) {
      const SessionRecord& record = *records.at(source.sequence);
      const int64_t stored = record.ledger.entry(source.entry).row;
      keys.push_back(record.ledger.keys(stored)[l]);  // [kv_heads, head_dim]
      values.push_back(record.ledger.values(stored)[l]);
    }
    at::Tensor k = keys.empty() ? torch::zeros({config.num_kv_heads, 0, config.head_dim})
                                : torch::stack(keys, 1).contiguous();  // [kv_heads, n_rows, head_dim]
    at::Tensor v = values.empty() ? k.clone() : torch::stack(values, 1).contiguous();
    out.emplace_back(role + ".layer" + std::to_string(l) + ".keys", k.to(torch::kFloat32).contiguous());
    out.emplace_back(role + ".layer" + std::to_string(l) + ".values", v.to(torch::kFloat32).contiguous());
  }
}

void refuseWhatACaptureCannotHold(const SessionRecord& record, const CaptureModelSource& target,
                                  const CaptureModelSource& drafter) {
  if (!record.use_cache) throw Error("a capture records the KV caches: this session ran without them (--cache on)");
  for (const CacheEvent& e : record.events.events()) {
    if (e.masksRows()) {
      throw Error("a capture cannot hold an eviction policy's masks (rows hidden per kv head, not removed): run without "
                  "--evict to write a capture");
    }
  }
  if (!target.model) throw Error("a capture needs the target model");
  if (record.drafter_layers > 0 && !drafter.model) throw Error("a capture needs the drafter model");
}

void writeCaptureFile(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      int version, const Json& manifest) {
  std::vector<StWriteTensor> st;
  for (const auto& [name, data] : tensors) {
    st.push_back({name, StDType::F32, std::vector<int64_t>(data.sizes().begin(), data.sizes().end()), data.data_ptr(),
                  static_cast<size_t>(data.nbytes())});
  }
  writeSafetensors(path, st,
                   {{"format", "kvscope-capture"}, {"version", std::to_string(version)}, {"kvscope_capture", manifest.dump()}});
}

}  // namespace kvscope::capture_writing
