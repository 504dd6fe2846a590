#include "core/trace/trace_file.h"

#include <set>

#include "core/error.h"
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

TraceData captureTrace(const Session& session, const Tokenizer* tokenizer, json info) {
  TraceData t;
  const SessionOptions& o = session.options();
  info["options"] = {{"gamma", o.gamma},           {"adaptive_gamma", o.adaptive_gamma},
                     {"max_new_tokens", o.max_new_tokens}, {"use_cache", o.use_cache},
                     {"sampling", o.sampling.describe()}, {"seed", o.seed},
                     {"bookkeeping", bookkeepingName(o.bookkeeping)}, {"ignore_eos", o.ignore_eos}};
  info["target"]["architecture"] = session.target().config().architecture_name;
  info["target"]["layers"] = session.target().config().num_layers;
  info["drafter"]["description"] = session.drafter() ? session.drafter()->describe() : "none";
  info["finished"] = session.finished();
  t.info = std::move(info);
  t.sequence = session.sequence();
  t.origins = session.origins();
  t.prompt_length = session.promptLength();
  t.rounds = session.rounds();
  t.verify = session.verifyRecords();
  t.ledger = session.ledger();
  if (tokenizer) {
    std::set<int64_t> ids(t.sequence.begin(), t.sequence.end());
    for (const RoundRecord& r : t.rounds) ids.insert(r.drafts.begin(), r.drafts.end());
    for (int64_t id : ids) {
      if (id >= 0 && id < tokenizer->vocabSize()) t.token_text[id] = tokenizer->tokenText(id);
    }
  }
  return t;
}

void writeTrace(const std::string& path, const TraceData& t) {
  NamedTensors tensors;
  json ledger_json = json::array();
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    std::vector<at::Tensor> k, v;
    for (const LedgerEntry& e : t.ledger.entries()) {
      if (e.cache != role) continue;
      json entry = toJson(e);
      entry["row"] = static_cast<int64_t>(k.size());  // index within this cache's row tensor
      ledger_json.push_back(entry);
      k.push_back(t.ledger.keys(e.row));
      v.push_back(t.ledger.values(e.row));
    }
    if (!k.empty()) {
      tensors.emplace_back(rowsName(role, "k"), torch::stack(k));  // [entries, layers, kv_heads, head_dim]
      tensors.emplace_back(rowsName(role, "v"), torch::stack(v));
    }
  }
  json verify_json = json::array();
  for (const auto& [round, record] : t.verify) {
    json item = {{"round", round}, {"first_query_position", record.first_query_position},
                 {"has_logits", record.logits.defined()}, {"attention_layers", record.attention.size()}};
    verify_json.push_back(item);
    if (record.logits.defined()) tensors.emplace_back(roundTensorName(round, "logits"), record.logits);
    for (size_t layer = 0; layer < record.attention.size(); ++layer) {
      tensors.emplace_back(roundTensorName(round, "attention." + std::to_string(layer)), record.attention[layer]);
    }
  }
  json rounds = json::array();
  for (const RoundRecord& r : t.rounds) rounds.push_back(toJson(r));
  std::vector<std::string> origins;
  for (TokenOrigin o : t.origins) origins.push_back(tokenOriginName(o));
  // Byte-fallback tokens display as partial UTF-8 sequences, which JSON
  // strings cannot hold: those go to "token_bytes" as byte values.
  json token_text = json::object(), token_bytes = json::object();
  for (const auto& [id, text] : t.token_text) {
    try {
      (void)json(text).dump();  // throws on invalid UTF-8
      token_text[std::to_string(id)] = text;
    } catch (const json::type_error&) {
      token_bytes[std::to_string(id)] = std::vector<uint8_t>(text.begin(), text.end());
    }
  }
  const json doc = {{"format", kFormatName},     {"version", kTraceFormatVersion}, {"info", t.info},
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

void readLedger(const SafetensorsFile& file, const json& ledger_json, TraceData& t) {
  std::vector<LedgerEntry> entries;
  std::vector<at::Tensor> k_rows, v_rows;
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    at::Tensor k, v;
    for (const json& j : ledger_json) {
      LedgerEntry e = ledgerEntryFromJson(j);
      if (e.cache != role) continue;
      if (!k.defined()) {
        k = requireTensor(file, rowsName(role, "k"));
        v = requireTensor(file, rowsName(role, "v"));
        if (k.sizes() != v.sizes() || k.dim() != 4) fail(file.path(), "ledger K and V rows of the " + std::string(cacheRoleName(role)) + " cache have bad shapes");
      }
      if (e.row < 0 || e.row >= k.size(0)) fail(file.path(), "ledger entry row " + std::to_string(e.row) + " out of range");
      const int64_t global_row = static_cast<int64_t>(k_rows.size());
      k_rows.push_back(k[e.row]);
      v_rows.push_back(v[e.row]);
      e.row = global_row;
      entries.push_back(e);
    }
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
  if (version != kTraceFormatVersion) {
    fail(path, "trace format version " + std::to_string(version) + " is not supported (this build reads version " +
                   std::to_string(kTraceFormatVersion) + ")");
  }
  TraceData t;
  try {
    t.info = doc.at("info");
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
      t.verify[round] = std::move(record);
    }
    for (const auto& [id, text] : doc.at("token_text").items()) t.token_text[std::stoll(id)] = text.get<std::string>();
    if (doc.contains("token_bytes")) {
      for (const auto& [id, bytes] : doc.at("token_bytes").items()) {
        const auto b = bytes.get<std::vector<uint8_t>>();
        t.token_text[std::stoll(id)] = std::string(b.begin(), b.end());
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
  return t;
}

}  // namespace kvscope
