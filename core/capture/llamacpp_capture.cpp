#include "core/capture/llamacpp_capture.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "core/capture/llamacpp_state.h"
#include "core/error.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_weights.h"
#include "core/model/json_limits.h"
#include "core/model/model_config.h"
#include "core/model/safetensors.h"

namespace kvscope {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const JsonLimits kLogLimits{"llama.cpp recorder log", size_t{256} << 20, 16, 50000000, true, true};
constexpr const char* kRecorder = "kvscope llama.cpp importer 1";

// One role's model, and every row its cache held, stored once.
struct Role {
  std::string name;
  std::string name_or_path;  // as the log gives it (the capture keeps it)
  fs::path dir;
  ModelConfig config;
  bool deinterleave = false;  // llama.cpp's "llama" keys: per-head pairs, not halves
  std::vector<std::vector<std::vector<uint8_t>>> k_rows, v_rows;  // [layer][row] -> bytes
  std::vector<LlamaCacheType> type;                                // per layer
  std::vector<bool> type_known;
  std::vector<std::vector<int64_t>> state;  // the presented slots after the last event: [layer] -> row ids
  json calls = json::array();
  int64_t call_count = 0;
  uint64_t width() const { return static_cast<uint64_t>(config.num_kv_heads * config.head_dim); }
};

std::string str(const json& j, const char* key, const std::string& ctx) {
  if (!j.contains(key) || !j[key].is_string()) fail(ctx, std::string("'") + key + "' must be a string");
  return j[key].get<std::string>();
}

std::vector<int64_t> ints(const json& j, const char* key, const std::string& ctx) {
  if (!j.contains(key) || !j[key].is_array()) fail(ctx, std::string("'") + key + "' must be an array of integers");
  std::vector<int64_t> out;
  for (const auto& v : j[key]) {
    if (!v.is_number_integer()) fail(ctx, std::string("'") + key + "' holds a non-integer");
    out.push_back(v.get<int64_t>());
  }
  return out;
}

bool windowIsActive(const ModelConfig& c) {
  if (c.sliding_window <= 0 || c.sliding_window >= c.max_position_embeddings) return false;
  return std::any_of(c.sliding_layers.begin(), c.sliding_layers.end(), [](bool s) { return s; });
}

Role openRole(const std::string& name, const json& entry, const fs::path& base) {
  const std::string ctx = "model '" + name + "' of the log";
  Role r;
  r.name = name;
  r.name_or_path = str(entry, "model_dir", ctx);
  r.dir = fs::path(r.name_or_path).is_absolute() ? fs::path(r.name_or_path) : base / r.name_or_path;
  r.config = loadModelConfig((r.dir / "config.json").string());
  if (windowIsActive(r.config))
    fail(ctx, "a sliding-window (iSWA) model: llama.cpp's window cache drops cells inside a decode, which the "
              "capture's append layers cannot show yet");
  const fs::path gguf = fs::path(str(entry, "gguf", ctx)).is_absolute() ? fs::path(str(entry, "gguf", ctx)) : base / str(entry, "gguf", ctx);
  const GgufFile g = readGguf(gguf.string());
  r.deinterleave = g.text("general.architecture") == "llama";
  const auto layers = static_cast<size_t>(r.config.num_layers);
  r.k_rows.resize(layers);
  r.v_rows.resize(layers);
  r.type.assign(layers, LlamaCacheType::F32);
  r.type_known.assign(layers, false);
  r.state.assign(layers, {});
  return r;
}

// Undoes llama.cpp's per-head pair interleave of one K row, in its own type.
void deinterleaveRow(std::vector<uint8_t>& row, int64_t heads, int64_t head_dim, uint64_t el) {
  std::vector<uint8_t> out(row.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t k = 0; k < 2; ++k)
        std::memcpy(out.data() + ((h * head_dim) + k * half + i) * el, row.data() + ((h * head_dim) + 2 * i + k) * el, el);
  row.swap(out);
}

// The cells of one layer of a state, each as (K row, V row) in the format's layout.
std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> cellRows(Role& role, const LlamaStateLayer& layer, size_t l,
                                                                            size_t cells, const std::string& ctx) {
  if (cells == 0) return {};
  if (layer.k_type != layer.v_type) fail(ctx, "layer " + std::to_string(l) + " keeps K and V in different types");
  if (role.type_known[l] && role.type[l] != layer.k_type) fail(ctx, "layer " + std::to_string(l) + " changed its cache type");
  role.type[l] = layer.k_type;
  role.type_known[l] = true;
  const uint64_t el = layer.k_type == LlamaCacheType::F32 ? 4 : 2;
  const uint64_t row = role.width() * el;
  std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> out(cells);
  for (size_t c = 0; c < cells; ++c) {
    out[c].first.assign(layer.k.begin() + static_cast<std::ptrdiff_t>(c * row), layer.k.begin() + static_cast<std::ptrdiff_t>((c + 1) * row));
    out[c].second.assign(layer.v.begin() + static_cast<std::ptrdiff_t>(c * row), layer.v.begin() + static_cast<std::ptrdiff_t>((c + 1) * row));
    if (role.deinterleave) deinterleaveRow(out[c].first, role.config.num_kv_heads, role.config.head_dim, el);
  }
  return out;
}

// Presents a state after an event: the rows of the previous state that are
// still held (same bits), in their previous order, then the cells holding
// new bits, by position. Returns the presented row ids per layer.
std::vector<std::vector<int64_t>> presentState(Role& role, const LlamaSeqState& st, const std::string& ctx, int64_t& new_rows) {
  const LlamaStateCache& cache = st.caches.at(0);
  const size_t cells = cache.positions.size();
  std::vector<std::vector<int64_t>> presented(role.state.size());
  new_rows = -1;
  for (size_t l = 0; l < role.state.size(); ++l) {
    auto rows = cellRows(role, cache.layers[l], l, cells, ctx);
    std::vector<bool> kept(role.state[l].size(), false);
    std::vector<size_t> fresh;
    for (size_t c = 0; c < cells; ++c) {
      bool matched = false;
      for (size_t s = 0; s < role.state[l].size() && !matched; ++s) {
        const int64_t id = role.state[l][s];
        if (!kept[s] && role.k_rows[l][id] == rows[c].first && role.v_rows[l][id] == rows[c].second) kept[s] = matched = true;
      }
      if (!matched) fresh.push_back(c);
    }
    for (size_t s = 0; s < role.state[l].size(); ++s)
      if (kept[s]) presented[l].push_back(role.state[l][s]);
    std::stable_sort(fresh.begin(), fresh.end(), [&](size_t a, size_t b) { return cache.positions[a] < cache.positions[b]; });
    for (const size_t c : fresh) {
      presented[l].push_back(static_cast<int64_t>(role.k_rows[l].size()));
      role.k_rows[l].push_back(std::move(rows[c].first));
      role.v_rows[l].push_back(std::move(rows[c].second));
    }
    if (l == 0) new_rows = static_cast<int64_t>(fresh.size());
  }
  return presented;
}

json stateJson(const std::vector<std::vector<int64_t>>& layers) {
  json kinds = json::array(), out = json::array();
  for (const auto& ids : layers) {
    kinds.push_back("append");
    json runs = json::array();
    for (size_t i = 0; i < ids.size();) {
      size_t j = i + 1;
      while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
      runs.push_back({ids[i], static_cast<int64_t>(j - i)});
      i = j;
    }
    out.push_back(runs);
  }
  return {{"cache", "llama_kv_cache"}, {"kinds", kinds}, {"layers", out}};
}

// The recorder's hint of what changed between two calls (informational).
json betweenHint(const std::vector<std::vector<int64_t>>& prev, const std::vector<std::vector<int64_t>>& now) {
  const auto& a = prev.at(0);
  const auto& b = now.at(0);
  std::string kind = "replace";
  if (a == b) kind = "none";
  else if (b.empty()) kind = "reset";
  else if (b.size() < a.size() && std::equal(b.begin(), b.end(), a.begin())) kind = "crop";
  json changed = json::array();
  for (size_t l = 0; l < prev.size(); ++l)
    if (prev[l] != now[l]) changed.push_back(l);
  return {{"kind", kind}, {"layers", changed},
          {"what", "layer 0: " + std::to_string(a.size()) + " -> " + std::to_string(b.size()) + " cells"}};
}

LlamaSeqState readState(const Role& role, const fs::path& path) {
  LlamaStateShape shape;
  shape.cache_layers = {role.config.num_layers};
  shape.kv_width = role.config.num_kv_heads * role.config.head_dim;
  return readLlamaSeqState(path.string(), shape);
}

struct Logits {
  std::string tensor;
  int64_t rows = 0;
  std::vector<float> values;
};

json fingerprintOf(const Role& role) {
  const WeightFiles w = WeightFiles::open(role.dir.string());
  for (const char* name : {"model.embed_tokens.weight", "transformer.wte.weight", "wte.weight"}) {
    if (!w.has(name)) continue;
    const HostTensor e = w.load(name);
    double sum = 0, sq = 0;
    for (const float x : e.data) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    return {{"tensor", "input_embeddings"}, {"shape", e.shape}, {"sum", sum}, {"sum_squares", sq}};
  }
  return nullptr;
}

json modelJson(const Role& r) {
  const auto& c = r.config;
  json sliding = nullptr;
  if (c.sliding_window > 0) sliding = c.sliding_layers;
  return {{"name_or_path", r.name_or_path},
          {"config", {{"model_type", c.model_type}, {"num_hidden_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
                      {"num_key_value_heads", c.num_kv_heads}, {"head_dim", c.head_dim}, {"hidden_size", c.hidden_size},
                      {"vocab_size", c.vocab_size}, {"sliding_window", c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr)},
                      {"sliding_layers", sliding}}},
          {"fingerprint", fingerprintOf(r)},
          {"layers", c.num_layers},
          {"calls", r.call_count}};
}

StDType stType(LlamaCacheType t) {
  return t == LlamaCacheType::F32 ? StDType::F32 : t == LlamaCacheType::F16 ? StDType::F16 : StDType::BF16;
}

// [rows][kv_heads * head_dim] -> [kv_heads, rows, head_dim]
std::vector<uint8_t> headMajor(const std::vector<std::vector<uint8_t>>& rows, int64_t heads, int64_t head_dim, uint64_t el) {
  std::vector<uint8_t> out(rows.size() * static_cast<size_t>(heads * head_dim) * el);
  const uint64_t chunk = static_cast<uint64_t>(head_dim) * el;
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t h = 0; h < heads; ++h)
      std::memcpy(out.data() + (static_cast<uint64_t>(h) * rows.size() + r) * chunk, rows[r].data() + h * chunk, chunk);
  return out;
}

class Importer {
 public:
  Importer(const std::string& log_path) : base_(fs::path(log_path).parent_path()) {
    log_ = readJsonFileWithLimits(log_path, kLogLimits);
    ctx_ = log_path;
    if (!log_.is_object() || log_.value("format", "") != "kvscope-llamacpp-log" || log_.value("version", 0) != 1)
      fail(ctx_, "not a kvscope llama.cpp recorder log, version 1");
    if (!log_.contains("models") || !log_["models"].is_object() || !log_["models"].contains("target"))
      fail(ctx_, "'models' must name a target");
    for (const auto& [name, entry] : log_["models"].items()) {
      if (name != "target" && name != "drafter") fail(ctx_, "role '" + name + "' (target and drafter only)");
      roles_.emplace(name, openRole(name, entry, base_));
    }
  }

  LlamaCaptureReport run(const std::string& out_path) {
    if (!log_.contains("events") || !log_["events"].is_array()) fail(ctx_, "'events' must be an array");
    size_t index = 0;
    for (const auto& e : log_["events"]) event(e, index++);
    return write(out_path);
  }

 private:
  Role& role(const json& e, const std::string& ctx) {
    const auto it = roles_.find(str(e, "role", ctx));
    if (it == roles_.end()) fail(ctx, "role '" + str(e, "role", ctx) + "' is not in 'models'");
    return it->second;
  }

  void event(const json& e, size_t index) {
    const std::string ctx = ctx_ + ": event " + std::to_string(index);
    Role& r = role(e, ctx);
    const std::string op = str(e, "op", ctx);
    const LlamaSeqState st = readState(r, base_ / str(e, "state", ctx));
    int64_t fresh = 0;
    if (op == "erase") {
      ++erases_;
      r.state = presentState(r, st, ctx, fresh);
      return;
    }
    if (op != "evaluate") fail(ctx, "op '" + op + "' (evaluate or erase)");
    const auto tokens = ints(e, "tokens", ctx);
    const auto positions = ints(e, "positions", ctx);
    if (tokens.empty() || positions.size() != tokens.size()) fail(ctx, "'tokens' and 'positions' must be equally long and not empty");
    const auto before = r.state;
    const auto after = presentState(r, st, ctx, fresh);
    json call = {{"role", r.name}, {"index", r.call_count}, {"input_ids", tokens}, {"positions", positions},
                 {"positions_source", "position_ids"}, {"cache_position", nullptr}, {"attention_mask", nullptr},
                 {"before", stateJson(before)}, {"between", nullptr}, {"after", stateJson(after)}, {"logits", nullptr}};
    if (r.call_count > 0) call["between"] = betweenHint(lastAfter_[r.name], before);
    if (e.contains("logits") && e["logits"].is_object()) call["logits"] = logits(r, e["logits"], tokens.size(), ctx);
    r.calls.push_back(std::move(call));
    ++r.call_count;
    r.state = after;
    lastAfter_[r.name] = after;
  }

  json logits(const Role& r, const json& l, size_t n, const std::string& ctx) {
    const int64_t rows = l.value("rows", int64_t{-1});
    if (rows < 0 || static_cast<size_t>(rows) > n) fail(ctx, "logits 'rows' must be 0.." + std::to_string(n));
    if (rows == 0) return nullptr;
    const fs::path file = base_ / str(l, "file", ctx);
    const uint64_t want = static_cast<uint64_t>(rows) * static_cast<uint64_t>(r.config.vocab_size) * 4;
    std::error_code ec;
    if (fs::file_size(file, ec) != want || ec) fail(ctx, file.string() + " must hold " + std::to_string(want) + " bytes of float32 logits");
    Logits lg;
    lg.tensor = r.name + ".call" + std::to_string(r.call_count) + ".logits";
    lg.rows = rows;
    lg.values.resize(want / 4);
    std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(lg.values.data()), static_cast<std::streamsize>(want));
    logits_.push_back(std::move(lg));
    return {{"rows", rows}, {"tensors", {{"logits", logits_.back().tensor}}}};
  }

  LlamaCaptureReport write(const std::string& out_path) {
    std::vector<StWriteTensor> tensors;
    std::vector<std::vector<uint8_t>> keep;  // the bytes the tensors point at
    keep.reserve(1024);
    json models = json::object(), calls = json::array();
    LlamaCaptureReport report;
    for (auto& [name, r] : roles_) {
      models[name] = modelJson(r);
      for (size_t l = 0; l < r.k_rows.size(); ++l) {
        const uint64_t el = r.type[l] == LlamaCacheType::F32 ? 4 : 2;
        const std::vector<int64_t> shape{r.config.num_kv_heads, static_cast<int64_t>(r.k_rows[l].size()), r.config.head_dim};
        for (const bool keys : {true, false}) {
          keep.push_back(headMajor(keys ? r.k_rows[l] : r.v_rows[l], r.config.num_kv_heads, r.config.head_dim, el));
          tensors.push_back({name + ".layer" + std::to_string(l) + (keys ? ".keys" : ".values"), stType(r.type[l]), shape,
                             keep.back().data(), keep.back().size()});
        }
        report.cache_type = llamaCacheTypeName(r.type[l]);
      }
      (name == "target" ? report.target_calls : report.drafter_calls) = r.call_count;
    }
    for (const auto& l : logits_)
      tensors.push_back({l.tensor, StDType::F32, {l.rows, static_cast<int64_t>(l.values.size()) / l.rows},
                         l.values.data(), l.values.size() * 4});
    for (const auto& e : callOrder()) calls.push_back(e);
    json manifest = {{"format", "kvscope-capture"}, {"version", 1},
                     {"engine", {{"name", log_.value("engine", std::string("llama.cpp"))}, {"recorder", kRecorder}}},
                     {"complete", log_.value("complete", false)}, {"logits", {{"mode", "full"}}}, {"models", models},
                     {"calls", calls}, {"committed", log_.contains("committed") ? log_["committed"] : json(nullptr)}};
    writeSafetensors(out_path, tensors, {{"format", "kvscope-capture"}, {"version", "1"}, {"kvscope_capture", manifest.dump()}});
    report.erases = erases_;
    return report;
  }

  // Every call of both roles, in the order the log's events ran them.
  std::vector<json> callOrder() {
    std::vector<json> out;
    std::map<std::string, size_t> next;
    for (const auto& e : log_["events"]) {
      if (e.value("op", "") != "evaluate") continue;
      const std::string name = e.value("role", "");
      out.push_back(roles_.at(name).calls.at(next[name]++));
    }
    return out;
  }

  fs::path base_;
  std::string ctx_;
  json log_;
  std::map<std::string, Role> roles_;
  std::map<std::string, std::vector<std::vector<int64_t>>> lastAfter_;
  std::vector<Logits> logits_;
  int64_t erases_ = 0;
};

}  // namespace

LlamaCaptureReport importLlamaCapture(const std::string& log_path, const std::string& out_path) {
  Importer importer(log_path);
  return importer.run(out_path);
}

}  // namespace kvscope
