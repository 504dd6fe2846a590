#include "core/trace/trace_file.h"

#include <limits>

#include <torch/types.h>

#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"
#include "core/model/json_fields.h"
#include "core/model/json_limits.h"
#include "core/trace/trace_json.h"
#include "core/trace/trace_validator.h"

namespace kvscope {

using nlohmann::json;

namespace {

const char* kMetadataKey = "kvscope";
const char* kFormatName = "kvscope-trace";

// Tensor names of a batch's sequence i >= 1 start with "sequence.I." (the
// first sequence's have no prefix: a one-sequence trace is as before).
std::string sequencePrefix(int64_t sequence) {
  return sequence == 0 ? std::string() : "sequence." + std::to_string(sequence) + ".";
}

std::string rowsName(const std::string& prefix, CacheRole role, const char* kv) {
  return prefix + "ledger." + cacheRoleName(role) + "." + kv;  // e.g. ledger.target.k
}

std::string roundTensorName(const std::string& prefix, int64_t round, const std::string& what) {
  return prefix + "round." + std::to_string(round) + "." + what;
}

// One sequence's record as JSON fields, its tensors added to `tensors`.
json recordDocument(const SessionRecord& t, const std::string& prefix, NamedTensors& tensors) {
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
    tensors.emplace_back(rowsName(prefix, role, "k"), torch::stack(k[i]));  // [entries, layers, kv_heads, head_dim]
    tensors.emplace_back(rowsName(prefix, role, "v"), torch::stack(v[i]));
  }
  json verify_json = json::array();
  for (const auto& [round, record] : t.verify) {
    json item = {{"round", round}, {"first_query_position", record.first_query_position},
                 {"has_logits", record.logits.defined()}, {"attention_layers", record.attention.size()},
                 {"mask_layers", record.masks.size()}};
    if (record.attention_dropped) item["attention_dropped"] = true;  // by the trace budget
    if (record.logits_dropped) item["logits_dropped"] = true;
    verify_json.push_back(item);
    if (record.logits.defined()) tensors.emplace_back(roundTensorName(prefix, round, "logits"), record.logits);
    for (size_t layer = 0; layer < record.attention.size(); ++layer) {
      tensors.emplace_back(roundTensorName(prefix, round, "attention." + std::to_string(layer)), record.attention[layer]);
    }
    for (size_t layer = 0; layer < record.masks.size(); ++layer) {
      tensors.emplace_back(roundTensorName(prefix, round, "mask." + std::to_string(layer)),
                           record.masks[layer].to(torch::kFloat32));
    }
  }
  json rounds = json::array();
  for (const RoundRecord& r : t.rounds) rounds.push_back(toJson(r));
  json events = json::array();
  for (const CacheEvent& e : t.events.events()) events.push_back(toJson(e));
  std::vector<std::string> origins;
  for (TokenOrigin o : t.origins) origins.push_back(tokenOriginName(o));
  const json record = {{"bookkeeping", bookkeepingName(t.bookkeeping)}, {"fault", t.fault}, {"use_cache", t.use_cache},
                       {"target_layers", t.target_layers}, {"drafter_layers", t.drafter_layers}};
  return {{"record", record},          {"events", events},
          {"sequence", t.sequence},    {"origins", origins},    {"prompt_length", t.prompt_length},
          {"rounds", rounds},          {"verify", verify_json}, {"ledger", ledger_json}};
}

}  // namespace

void writeTrace(const std::string& path, const TraceData& trace) {
  require(trace.sequences() <= kMaxTraceSequences, "a trace holds at most " + std::to_string(kMaxTraceSequences) +
                                                       " sequences, got " + std::to_string(trace.sequences()));
  NamedTensors tensors;
  json doc = recordDocument(trace.record, sequencePrefix(0), tensors);
  if (!trace.more_sequences.empty()) {
    json batch = json::array();
    for (int64_t i = 1; i < trace.sequences(); ++i) batch.push_back(recordDocument(trace.sequence(i), sequencePrefix(i), tensors));
    doc["batch"] = std::move(batch);
  }
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
  doc["format"] = kFormatName;
  doc["version"] = kTraceFormatVersion;
  doc["info"] = trace.info;
  doc["token_text"] = std::move(token_text);
  doc["token_bytes"] = std::move(token_bytes);
  const std::string text = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  saveTensors(path, tensors, {{kMetadataKey, text}, {"format", "pt"}}, StDType::F32);
}

namespace {

// A trace's tensors are float (masks are stored as 0/1 floats); anything else
// would be read through the wrong element type by the views.
at::Tensor requireTensor(const SafetensorsFile& file, const std::string& name) {
  const StTensorInfo* info = file.find(name);
  if (!info) fail(file.path(), "trace is missing tensor '" + name + "'");
  if (info->dtype != StDType::F32 && info->dtype != StDType::F16 && info->dtype != StDType::BF16 &&
      info->dtype != StDType::F64)
    fail(file.path(), "trace tensor '" + name + "' is stored as " + stDTypeName(info->dtype) + ", not as floats");
  return toTensor(file, *info, torch::kFloat32);
}

// Field reads with the field named; the caller adds the path.
const json& member(const json& j, const std::string& where, const char* key) {
  if (!j.is_object()) throw Error(where + " is not a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) throw Error(where + " has no field '" + key + "'");
  return *it;
}

int64_t integer(const json& j, const std::string& where, const char* key, int64_t min, int64_t max) {
  return jsonInteger(member(j, where, key), "trace", where + "." + key, min, max);
}

bool boolean(const json& j, const std::string& where, const char* key) {
  const json& v = member(j, where, key);
  if (!v.is_boolean()) throw Error(where + "." + key + " must be true or false, got " + jsonSnippet(v));
  return v.get<bool>();
}

std::string text(const json& j, const std::string& where, const char* key) {
  return jsonString(member(j, where, key), "trace", where + "." + key);
}

const json& list(const json& j, const std::string& where, const char* key) {
  const json& v = member(j, where, key);
  if (!v.is_array()) throw Error(where + "." + key + " must be a list, got " + jsonSnippet(v));
  return v;
}

void readLedger(const SafetensorsFile& file, const std::string& prefix, const json& ledger_json, SessionRecord& t) {
  std::vector<LedgerEntry> entries;
  std::vector<at::Tensor> k_rows, v_rows;
  at::Tensor k[2], v[2];
  for (const json& j : ledger_json) {
    LedgerEntry e = ledgerEntryFromJson(j);
    const CacheRole role = e.cache;
    const int i = role == CacheRole::Target ? 0 : 1;
    if (!k[i].defined()) {
      k[i] = requireTensor(file, rowsName(prefix, role, "k"));
      v[i] = requireTensor(file, rowsName(prefix, role, "v"));
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

// The "kvscope" metadata: parsed within the trace limits, of our format and version.
json readDocument(const SafetensorsFile& file) {
  const std::string& path = file.path();
  const auto it = file.metadata().find(kMetadataKey);
  if (it == file.metadata().end()) fail(path, "not a kvscope trace (no 'kvscope' entry in the safetensors metadata)");
  json doc = parseJsonWithLimits(it->second, path, kTraceMetadataLimits);
  if (!doc.is_object()) fail(path, "the trace's 'kvscope' metadata is not a JSON object");
  const auto format = doc.find("format");
  if (format == doc.end() || *format != kFormatName)
    fail(path, "not a kvscope trace (format is not '" + std::string(kFormatName) + "')");
  const auto version_it = doc.find("version");
  const int64_t version = version_it != doc.end() && version_it->is_number_integer() ? version_it->get<int64_t>() : 0;
  if (version == 1) {
    fail(path, "trace format version 1 (kvscope before row identity and the cache event log) is not supported by "
               "this build, which reads version " + std::to_string(kTraceFormatVersion) +
               "; record the session again to get rows, events and root causes");
  }
  if (version < kOldestTraceFormatVersion || version > kTraceFormatVersion) {
    fail(path, "trace format version " + (version_it == doc.end() ? std::string("(none)") : jsonSnippet(*version_it)) +
                   " is not supported (this build reads versions " + std::to_string(kOldestTraceFormatVersion) + " to " +
                   std::to_string(kTraceFormatVersion) + ")");
  }
  return doc;
}

void readRecordFields(const json& doc, SessionRecord& t) {
  const json& record = member(doc, "document", "record");
  t.bookkeeping = parseBookkeeping(text(record, "record", "bookkeeping"));
  t.fault = text(record, "record", "fault");
  t.use_cache = boolean(record, "record", "use_cache");
  t.target_layers = integer(record, "record", "target_layers", 1, kMaxTraceLayers);
  t.drafter_layers = integer(record, "record", "drafter_layers", 0, kMaxTraceLayers);
  std::vector<CacheEvent> events;
  for (const json& e : list(doc, "document", "events")) events.push_back(cacheEventFromJson(e));
  t.events.restore(std::move(events));
  t.sequence = jsonIntegers(member(doc, "document", "sequence"), "trace", "sequence", 0, kMaxTraceTokenId - 1);
  for (const json& o : list(doc, "document", "origins")) t.origins.push_back(parseTokenOrigin(jsonString(o, "trace", "origins")));
  t.prompt_length = integer(doc, "document", "prompt_length", 0, std::numeric_limits<int64_t>::max());
  for (const json& r : list(doc, "document", "rounds")) t.rounds.push_back(roundFromJson(r));
}

void readVerify(const SafetensorsFile& file, const std::string& prefix, const json& doc, SessionRecord& t) {
  for (const json& v : list(doc, "document", "verify")) {
    VerifyRecord record;
    const int64_t round = integer(v, "verify", "round", 0, std::numeric_limits<int64_t>::max());
    const std::string where = "verify of round " + std::to_string(round);
    if (t.verify.count(round)) throw Error("two verify records for round " + std::to_string(round));
    record.first_query_position = integer(v, where, "first_query_position", 0, std::numeric_limits<int64_t>::max());
    if (boolean(v, where, "has_logits")) record.logits = requireTensor(file, roundTensorName(prefix, round, "logits"));
    const int64_t layers = integer(v, where, "attention_layers", 0, kMaxTraceLayers);
    for (int64_t layer = 0; layer < layers; ++layer) {
      record.attention.push_back(requireTensor(file, roundTensorName(prefix, round, "attention." + std::to_string(layer))));
    }
    const int64_t mask_layers = v.contains("mask_layers") ? integer(v, where, "mask_layers", 0, kMaxTraceLayers) : 0;
    for (int64_t layer = 0; layer < mask_layers; ++layer) {
      record.masks.push_back(requireTensor(file, roundTensorName(prefix, round, "mask." + std::to_string(layer))) > 0.5);
    }
    record.attention_dropped = v.contains("attention_dropped") && boolean(v, where, "attention_dropped");
    record.logits_dropped = v.contains("logits_dropped") && boolean(v, where, "logits_dropped");
    t.verify[round] = std::move(record);
  }
}

// token_text keys are decimal ids; the validator bounds their values.
int64_t tokenIdKey(const std::string& key) {
  const bool digits = !key.empty() && key.size() <= 18 && key.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) throw Error("token_text key '" + key.substr(0, 40) + "' is not a token id");
  return std::stoll(key);
}

void readTokenText(const json& doc, TraceData& trace) {
  const json& token_text = member(doc, "document", "token_text");
  if (!token_text.is_object()) throw Error("token_text is not a JSON object");
  for (const auto& [id, value] : token_text.items()) trace.token_text[tokenIdKey(id)] = jsonString(value, "trace", "token_text");
  if (!doc.contains("token_bytes")) return;
  const json& token_bytes = doc.at("token_bytes");
  if (!token_bytes.is_object()) throw Error("token_bytes is not a JSON object");
  for (const auto& [id, bytes] : token_bytes.items()) {
    std::string value;
    for (int64_t byte : jsonIntegers(bytes, "trace", "token_bytes['" + id.substr(0, 40) + "']", 0, 255))
      value += static_cast<char>(byte);
    trace.token_text[tokenIdKey(id)] = value;
  }
}

SessionRecord readRecord(const SafetensorsFile& file, const json& doc, const std::string& prefix) {
  SessionRecord record;
  readRecordFields(doc, record);
  readVerify(file, prefix, doc, record);
  readLedger(file, prefix, list(doc, "document", "ledger"), record);
  return record;
}

// Version 4's batch: sequences 1, 2, ... each a record document of its own.
void readBatch(const SafetensorsFile& file, const json& doc, TraceData& trace) {
  if (!doc.contains("batch")) return;
  const json& batch = list(doc, "document", "batch");
  if (static_cast<int64_t>(batch.size()) + 1 > kMaxTraceSequences) {
    throw Error("batch holds " + std::to_string(batch.size() + 1) + " sequences, more than the " +
                std::to_string(kMaxTraceSequences) + " a trace may");
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    try {
      trace.more_sequences.push_back(readRecord(file, batch[i], sequencePrefix(static_cast<int64_t>(i) + 1)));
    } catch (const Error& e) {
      std::string message = e.what();
      if (message.rfind(file.path() + ": ", 0) == 0) message = message.substr(file.path().size() + 2);
      throw Error("sequence " + std::to_string(i + 1) + " of the batch: " + message);
    }
  }
}

}  // namespace

TraceData readTrace(const std::string& path) {
  const auto file = SafetensorsFile::open(path);
  const json doc = readDocument(*file);
  TraceData trace;
  try {
    trace.info = member(doc, "document", "info");
    trace.record = readRecord(*file, doc, sequencePrefix(0));
    readBatch(*file, doc, trace);
    readTokenText(doc, trace);
  } catch (const Error& e) {
    // Errors from the field readers carry "trace: " for the file; say which.
    std::string message = e.what();
    if (message.rfind("trace: ", 0) == 0) message = message.substr(7);
    if (message.rfind(path + ": ", 0) == 0) message = message.substr(path.size() + 2);
    fail(path, "corrupted trace: " + message);
  } catch (const std::exception& e) {
    fail(path, std::string("corrupted trace: ") + e.what());
  }
  validateTrace(trace, path);
  return trace;
}

}  // namespace kvscope
