#include "core/trace/trace_file.h"

#include <set>

#include <torch/torch.h>

#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"
#include "core/trace/trace_json.h"

namespace kvscope {

using nlohmann::json;

namespace {

const char* kMetadataKey = "kvscope";
const char* kFormatName = "kvscope-trace";

std::string rowsName(CacheRole role, const char* kv) {
  return std::string("ledger.") + cacheRoleName(role) + "." + kv;  // e.g. ledger.target.k
}

std::string roundTensorName(int64_t round, const std::string& what) {
  return "round." + std::to_string(round) + "." + what;
}

}  // namespace

void writeTrace(const std::string& path, const TraceData& trace) {
  const SessionRecord& t = trace.record;
  NamedTensors tensors;
  // Entries keep their order (cache events refer to them by index); each
  // cache's rows go to its own tensor, since the two models differ in shape.
  json ledger_json = json::array();
  std::vector<at::Tensor> k[2], v[2];
  for (const LedgerEntry& e : t.ledger.entries()) {
    const int role = e.cache == CacheRole::Target ? 0 : 1;
    json entry = toJson(e);
    entry["row"] = static_cast<int64_t>(k[role].size());  // index within this cache's row tensor
    ledger_json.push_back(entry);
    k[role].push_back(t.ledger.keys(e.row));
    v[role].push_back(t.ledger.values(e.row));
  }
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    const int i = role == CacheRole::Target ? 0 : 1;
    if (k[i].empty()) continue;
    tensors.emplace_back(rowsName(role, "k"), torch::stack(k[i]));  // [entries, layers, kv_heads, head_dim]
    tensors.emplace_back(rowsName(role, "v"), torch::stack(v[i]));
  }
  json verify_json = json::array();
  for (const auto& [round, record] : t.verify) {
    json item = {{"round", round}, {"first_query_position", record.first_query_position},
                 {"has_logits", record.logits.defined()}, {"attention_layers", record.attention.size()},
                 {"mask_layers", record.masks.size()}};
    verify_json.push_back(item);
    if (record.logits.defined()) tensors.emplace_back(roundTensorName(round, "logits"), record.logits);
    for (size_t layer = 0; layer < record.attention.size(); ++layer) {
      tensors.emplace_back(roundTensorName(round, "attention." + std::to_string(layer)), record.attention[layer]);
    }
    for (size_t layer = 0; layer < record.masks.size(); ++layer) {
      tensors.emplace_back(roundTensorName(round, "mask." + std::to_string(layer)), record.masks[layer].to(torch::kFloat32));
    }
  }
  json rounds = json::array();
  for (const RoundRecord& r : t.rounds) rounds.push_back(toJson(r));
  json events = json::array();
  for (const CacheEvent& e : t.events.events()) events.push_back(toJson(e));
  std::vector<std::string> origins;
  for (TokenOrigin o : t.origins) origins.push_back(tokenOriginName(o));
  // Byte-fallback tokens display as partial UTF-8 sequences, which JSON
  // strings cannot hold: those go to "token_bytes" as byte values.
  json token_text = json::object(), token_bytes = json::object();
  for (const auto& [id, text] : trace.token_text) {
    try {
      (void)json(text).dump();  // throws on invalid UTF-8
      token_text[std::to_string(id)] = text;
    } catch (const json::type_error&) {
      token_bytes[std::to_string(id)] = std::vector<uint8_t>(text.begin(), text.end());
    }
  }
  const json record = {{"bookkeeping", bookkeepingName(t.bookkeeping)}, {"fault", t.fault}, {"use_cache", t.use_cache},
                       {"target_layers", t.target_layers}, {"drafter_layers", t.drafter_layers}};
  const json doc = {{"format", kFormatName},     {"version", kTraceFormatVersion}, {"info", trace.info},
                    {"record", record},          {"events", events},
                    {"sequence", t.sequence},    {"origins", origins},             {"prompt_length", t.prompt_length},
                    {"rounds", rounds},          {"verify", verify_json},          {"ledger", ledger_json},
                    {"token_text", token_text},  {"token_bytes", token_bytes}};
  const std::string text = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  saveTensors(path, tensors, {{kMetadataKey, text}, {"format", "pt"}}, StDType::F32);
}

namespace {

at::Tensor requireTensor(const SafetensorsFile& file, const std::string& name) {
  const StTensorInfo* info = file.find(name);
  if (!info) fail(file.path(), "trace is missing tensor '" + name + "'");
  return toTensor(file, *info, torch::kFloat32);
}

void readLedger(const SafetensorsFile& file, const json& ledger_json, SessionRecord& t) {
  std::vector<LedgerEntry> entries;
  std::vector<at::Tensor> k_rows, v_rows;
  at::Tensor k[2], v[2];
  for (const json& j : ledger_json) {
    LedgerEntry e = ledgerEntryFromJson(j);
    const CacheRole role = e.cache;
    const int i = role == CacheRole::Target ? 0 : 1;
    if (!k[i].defined()) {
      k[i] = requireTensor(file, rowsName(role, "k"));
      v[i] = requireTensor(file, rowsName(role, "v"));
      if (k[i].sizes() != v[i].sizes() || k[i].dim() != 4) {
        fail(file.path(), "ledger K and V rows of the " + std::string(cacheRoleName(role)) + " cache have bad shapes");
      }
    }
    if (e.row < 0 || e.row >= k[i].size(0)) fail(file.path(), "ledger entry row " + std::to_string(e.row) + " out of range");
    const int64_t global_row = static_cast<int64_t>(k_rows.size());
    k_rows.push_back(k[i][e.row]);
    v_rows.push_back(v[i][e.row]);
    e.row = global_row;
    entries.push_back(e);
  }
  t.ledger.restore(std::move(entries), std::move(k_rows), std::move(v_rows));
}

}  // namespace

TraceData readTrace(const std::string& path) {
  const auto file = SafetensorsFile::open(path);
  const auto& metadata = file->metadata();
  const auto it = metadata.find(kMetadataKey);
  if (it == metadata.end()) fail(path, "not a kvscope trace (no 'kvscope' entry in the safetensors metadata)");
  const json doc = json::parse(it->second, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) fail(path, "the trace's 'kvscope' metadata is not valid JSON");
  if (doc.value("format", "") != kFormatName) fail(path, "not a kvscope trace (format is not '" + std::string(kFormatName) + "')");
  const int version = doc.value("version", 0);
  if (version == 1) {
    fail(path, "trace format version 1 (kvscope before row identity and the cache event log) is not supported by "
               "this build, which reads version " + std::to_string(kTraceFormatVersion) +
               "; record the session again to get rows, events and root causes");
  }
  if (version != kTraceFormatVersion) {
    fail(path, "trace format version " + std::to_string(version) + " is not supported (this build reads version " +
                   std::to_string(kTraceFormatVersion) + ")");
  }
  TraceData trace;
  SessionRecord& t = trace.record;
  try {
    trace.info = doc.at("info");
    const json& record = doc.at("record");
    t.bookkeeping = parseBookkeeping(record.at("bookkeeping").get<std::string>());
    t.fault = record.at("fault").get<std::string>();
    t.use_cache = record.at("use_cache").get<bool>();
    t.target_layers = record.at("target_layers").get<int64_t>();
    t.drafter_layers = record.at("drafter_layers").get<int64_t>();
    std::vector<CacheEvent> events;
    for (const json& e : doc.at("events")) events.push_back(cacheEventFromJson(e));
    t.events.restore(std::move(events));
    t.sequence = doc.at("sequence").get<std::vector<int64_t>>();
    for (const auto& o : doc.at("origins")) t.origins.push_back(parseTokenOrigin(o.get<std::string>()));
    t.prompt_length = doc.at("prompt_length").get<int64_t>();
    for (const json& r : doc.at("rounds")) t.rounds.push_back(roundFromJson(r));
    for (const json& v : doc.at("verify")) {
      VerifyRecord record;
      const int64_t round = v.at("round").get<int64_t>();
      record.first_query_position = v.at("first_query_position").get<int64_t>();
      if (v.at("has_logits").get<bool>()) record.logits = requireTensor(*file, roundTensorName(round, "logits"));
      const int64_t layers = v.at("attention_layers").get<int64_t>();
      for (int64_t layer = 0; layer < layers; ++layer) {
        record.attention.push_back(requireTensor(*file, roundTensorName(round, "attention." + std::to_string(layer))));
      }
      const int64_t mask_layers = v.value("mask_layers", int64_t{0});
      for (int64_t layer = 0; layer < mask_layers; ++layer) {
        record.masks.push_back(requireTensor(*file, roundTensorName(round, "mask." + std::to_string(layer))) > 0.5);
      }
      t.verify[round] = std::move(record);
    }
    for (const auto& [id, text] : doc.at("token_text").items()) trace.token_text[std::stoll(id)] = text.get<std::string>();
    if (doc.contains("token_bytes")) {
      for (const auto& [id, bytes] : doc.at("token_bytes").items()) {
        const auto b = bytes.get<std::vector<uint8_t>>();
        trace.token_text[std::stoll(id)] = std::string(b.begin(), b.end());
      }
    }
    readLedger(*file, doc.at("ledger"), t);
  } catch (const Error& e) {
    fail(path, std::string("corrupted trace: ") + e.what());
  } catch (const std::exception& e) {
    fail(path, std::string("corrupted trace: ") + e.what());
  }
  if (t.origins.size() != t.sequence.size() || t.prompt_length > static_cast<int64_t>(t.sequence.size())) {
    fail(path, "corrupted trace: sequence, origins and prompt length disagree");
  }
  for (const CacheEvent& e : t.events.events()) {
    for (int64_t entry : e.written) {
      if (entry < 0 || entry >= t.ledger.size()) fail(path, "corrupted trace: a cache event names ledger entry " + std::to_string(entry) + ", which does not exist");
    }
    for (int64_t entry : e.removed) {
      if (entry < 0 || entry >= t.ledger.size()) fail(path, "corrupted trace: a cache event names ledger entry " + std::to_string(entry) + ", which does not exist");
    }
  }
  return trace;
}

}  // namespace kvscope
