#include "core/trace/trace_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/model/json_fields.h"

namespace kvscope {

using nlohmann::json;

namespace {

template <typename Enum, size_t N>
Enum parseByName(const std::string& name, const Enum (&values)[N], const char* (*namer)(Enum), const char* what) {
  for (Enum v : values) {
    if (name == namer(v)) return v;
  }
  throw Error(std::string("unknown ") + what + " '" + name + "'");
}

template <typename T>
T field(const json& j, const char* key) {
  if (!j.contains(key)) throw Error(std::string("missing field '") + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(std::string("field '") + key + "' has the wrong type");
  }
}

// Integers must be JSON integers: get<int64_t>() would truncate 2.5, and
// convert 1e300 with undefined behaviour.
bool isInt64(const json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

template <>
int64_t field<int64_t>(const json& j, const char* key) {
  if (!j.contains(key)) throw Error(std::string("missing field '") + key + "'");
  const json& v = j.at(key);
  if (!isInt64(v)) throw Error(std::string("field '") + key + "' must be an integer, got " + jsonSnippet(v));
  return v.get<int64_t>();
}

template <>
std::vector<int64_t> field<std::vector<int64_t>>(const json& j, const char* key) {
  if (!j.contains(key)) throw Error(std::string("missing field '") + key + "'");
  const json& v = j.at(key);
  if (!v.is_array() || !std::all_of(v.begin(), v.end(), isInt64))
    throw Error(std::string("field '") + key + "' must be a list of integers, got " + jsonSnippet(v));
  return v.get<std::vector<int64_t>>();
}

}  // namespace

Phase parsePhase(const std::string& name) {
  static const Phase all[] = {Phase::Prefill, Phase::Draft, Phase::Verify, Phase::Accept, Phase::Prune};
  return parseByName(name, all, phaseName, "phase");
}

CacheRole parseCacheRole(const std::string& name) {
  static const CacheRole all[] = {CacheRole::Target, CacheRole::Drafter};
  return parseByName(name, all, cacheRoleName, "cache");
}

TokenOrigin parseTokenOrigin(const std::string& name) {
  static const TokenOrigin all[] = {TokenOrigin::Prompt, TokenOrigin::AcceptedDraft, TokenOrigin::Correction,
                                    TokenOrigin::Bonus};
  return parseByName(name, all, tokenOriginName, "token origin");
}

DeathReason parseDeathReason(const std::string& name) {
  static const DeathReason all[] = {DeathReason::Alive, DeathReason::RejectedDraft, DeathReason::Refeed,
                                    DeathReason::Eviction, DeathReason::Reset, DeathReason::Padding};
  return parseByName(name, all, deathReasonName, "death reason");
}

namespace {

// A policy's masked rows as four parallel lists (one value per row each: the
// compact form for thousands of rows). A score that is not finite is written
// as null and read back as NaN.
json maskedToJson(const std::vector<MaskedRow>& masked) {
  json entries = json::array(), layers = json::array(), heads = json::array(), scores = json::array();
  for (const MaskedRow& m : masked) {
    entries.push_back(m.entry);
    layers.push_back(m.layer);
    heads.push_back(m.kv_head);
    scores.push_back(std::isfinite(m.score) ? json(m.score) : json(nullptr));
  }
  return {{"entries", entries}, {"layers", layers}, {"kv_heads", heads}, {"scores", scores}};
}

std::vector<double> scoresFromJson(const json& j) {
  if (!j.contains("scores") || !j.at("scores").is_array()) throw Error("field 'masked.scores' must be a list of numbers");
  std::vector<double> scores;
  for (const json& v : j.at("scores")) {
    if (!v.is_number() && !v.is_null()) throw Error("field 'masked.scores' must be a list of numbers, got " + jsonSnippet(v));
    scores.push_back(v.is_null() ? std::nan("") : v.get<double>());
  }
  return scores;
}

std::vector<MaskedRow> maskedFromJson(const json& j) {
  if (!j.is_object()) throw Error("field 'masked' must be an object of lists, got " + jsonSnippet(j));
  const auto entries = field<std::vector<int64_t>>(j, "entries");
  const auto layers = field<std::vector<int64_t>>(j, "layers");
  const auto heads = field<std::vector<int64_t>>(j, "kv_heads");
  const auto scores = scoresFromJson(j);
  if (layers.size() != entries.size() || heads.size() != entries.size() || scores.size() != entries.size()) {
    throw Error("field 'masked' lists differ in length (entries " + std::to_string(entries.size()) + ", layers " +
                std::to_string(layers.size()) + ", kv_heads " + std::to_string(heads.size()) + ", scores " +
                std::to_string(scores.size()) + ")");
  }
  std::vector<MaskedRow> masked;
  for (size_t i = 0; i < entries.size(); ++i) masked.push_back({entries[i], layers[i], heads[i], scores[i]});
  return masked;
}

}  // namespace

json toJson(const std::vector<DanglingBlock>& blocks) {
  json out = json::array();
  for (const DanglingBlock& d : blocks) {
    out.push_back({{"block", d.block}, {"first_row", d.first_row}, {"rows", d.rows},
                   {"owner", d.owner >= 0 ? json(d.owner) : json()}});
  }
  return out;
}

std::vector<DanglingBlock> danglingBlocksFromJson(const json& j) {
  if (!j.is_array()) throw Error("field 'dangling_blocks' must be a list, got " + jsonSnippet(j));
  std::vector<DanglingBlock> blocks;
  for (const json& b : j) {
    if (!b.is_object()) throw Error("field 'dangling_blocks' must hold objects, got " + jsonSnippet(b));
    DanglingBlock d;
    d.block = field<int64_t>(b, "block");
    d.first_row = field<int64_t>(b, "first_row");
    d.rows = field<int64_t>(b, "rows");
    d.owner = b.contains("owner") && !b.at("owner").is_null() ? field<int64_t>(b, "owner") : -1;
    if (d.block < 0 || d.first_row < 0 || d.rows <= 0 || d.owner < -1) {
      throw Error("field 'dangling_blocks' holds a negative block, row or owner, or an empty block: " + jsonSnippet(b));
    }
    blocks.push_back(d);
  }
  return blocks;
}

json toJson(const CacheEvent& e) {
  json j = {{"cache", cacheRoleName(e.cache)},   {"round", e.round},
            {"phase", phaseName(e.phase)},       {"operation", cacheEventKindName(e.kind)},
            {"rows_before", e.rows_before},      {"rows_after", e.rows_after},
            {"expected_rows", e.expected_rows},  {"written", e.written},
            {"removed", e.removed},              {"reason", deathReasonName(e.reason)},
            {"fault_action", e.fault_action},    {"max_store_error", e.max_store_error}};
  // Only sliding windows set these; traces without them read as "all layers from 0".
  if (!e.expected_first.empty()) j["expected_first"] = e.expected_first;
  if (!e.layers.empty()) j["layers"] = e.layers;
  if (!e.policy.empty()) j["policy"] = e.policy;
  if (!e.masked.empty()) j["masked"] = maskedToJson(e.masked);
  if (!e.dangling_blocks.empty()) j["dangling_blocks"] = toJson(e.dangling_blocks);  // a paged cache's, version 4
  if (!e.hidden_padding.empty()) j["hidden_padding"] = e.hidden_padding;  // a padded batch's forwards
  if (!e.overwritten_rows.empty()) {
    j["overwritten_rows"] = e.overwritten_rows;
    j["overwritten_by"] = e.overwritten_by;
  }
  return j;
}

CacheEvent cacheEventFromJson(const json& j) {
  CacheEvent e;
  e.cache = parseCacheRole(field<std::string>(j, "cache"));
  e.round = field<int64_t>(j, "round");
  e.phase = parsePhase(field<std::string>(j, "phase"));
  e.kind = parseCacheEventKind(field<std::string>(j, "operation"));
  e.rows_before = field<std::vector<int64_t>>(j, "rows_before");
  e.rows_after = field<std::vector<int64_t>>(j, "rows_after");
  e.expected_rows = field<int64_t>(j, "expected_rows");
  e.written = field<std::vector<int64_t>>(j, "written");
  e.removed = field<std::vector<int64_t>>(j, "removed");
  e.reason = parseDeathReason(field<std::string>(j, "reason"));
  e.fault_action = field<std::string>(j, "fault_action");
  e.max_store_error = field<double>(j, "max_store_error");
  if (j.contains("expected_first")) e.expected_first = field<std::vector<int64_t>>(j, "expected_first");
  if (j.contains("layers")) e.layers = field<std::vector<int64_t>>(j, "layers");
  if (j.contains("policy")) e.policy = field<std::string>(j, "policy");
  if (j.contains("masked")) e.masked = maskedFromJson(j.at("masked"));
  if (j.contains("dangling_blocks")) e.dangling_blocks = danglingBlocksFromJson(j.at("dangling_blocks"));
  if (j.contains("hidden_padding")) e.hidden_padding = field<std::vector<int64_t>>(j, "hidden_padding");
  if (j.contains("overwritten_rows")) {
    e.overwritten_rows = field<std::vector<int64_t>>(j, "overwritten_rows");
    e.overwritten_by = field<int64_t>(j, "overwritten_by");
    const bool negative = std::any_of(e.overwritten_rows.begin(), e.overwritten_rows.end(), [](int64_t r) { return r < 0; });
    if (negative || e.overwritten_by < -1) throw Error("field 'overwritten_rows' holds a negative row or writer");
  }
  return e;
}

json toJson(const RoundRecord& r) {
  return {{"round", r.index},         {"start_length", r.start_length}, {"gamma", r.gamma},
          {"drafts", r.drafts},       {"q", r.q_draft},                 {"p", r.p_draft},
          {"uniforms", r.uniforms},   {"accepted", r.accepted},         {"next_token", r.next_token},
          {"bonus", r.bonus},         {"hit_eos", r.hit_eos},           {"emitted", r.emitted},
          {"prune_done", r.prune_done}, {"target_forwards", r.target_forwards},
          {"drafter_forwards", r.drafter_forwards},
          {"ms", {{"draft", r.draft_ms}, {"verify", r.verify_ms}, {"accept", r.accept_ms}, {"prune", r.prune_ms}}}};
}

RoundRecord roundFromJson(const json& j) {
  RoundRecord r;
  r.index = field<int64_t>(j, "round");
  r.start_length = field<int64_t>(j, "start_length");
  r.gamma = field<int64_t>(j, "gamma");
  r.drafts = field<std::vector<int64_t>>(j, "drafts");
  r.q_draft = field<std::vector<double>>(j, "q");
  r.p_draft = field<std::vector<double>>(j, "p");
  r.uniforms = field<std::vector<double>>(j, "uniforms");
  r.accepted = field<int64_t>(j, "accepted");
  r.next_token = field<int64_t>(j, "next_token");
  r.bonus = field<bool>(j, "bonus");
  r.hit_eos = field<bool>(j, "hit_eos");
  r.emitted = field<std::vector<int64_t>>(j, "emitted");
  r.target_forwards = field<int64_t>(j, "target_forwards");
  r.drafter_forwards = field<int64_t>(j, "drafter_forwards");
  const json ms = field<json>(j, "ms");
  r.draft_ms = field<double>(ms, "draft");
  r.verify_ms = field<double>(ms, "verify");
  r.accept_ms = field<double>(ms, "accept");
  r.prune_ms = field<double>(ms, "prune");
  r.prune_done = field<bool>(j, "prune_done");
  if (r.accepted < 0 || r.accepted > static_cast<int64_t>(r.drafts.size())) throw Error("round accepted count out of range");
  return r;
}

json toJson(const LedgerEntry& e) {
  json j = {{"cache", cacheRoleName(e.cache)}, {"position", e.position},       {"token", e.token},
            {"rope_position", e.rope_position},
            {"born_round", e.born_round},      {"born_phase", phaseName(e.born_phase)},
            {"died_round", e.died_round},      {"died_phase", phaseName(e.died_phase)},
            {"reason", deathReasonName(e.reason)}, {"row", e.row}};
  if (e.padding) j["padding"] = true;  // a padded batch's pad row; traces without it hold none
  return j;
}

LedgerEntry ledgerEntryFromJson(const json& j) {
  LedgerEntry e;
  e.cache = parseCacheRole(field<std::string>(j, "cache"));
  e.position = field<int64_t>(j, "position");
  e.rope_position = field<int64_t>(j, "rope_position");
  e.token = field<int64_t>(j, "token");
  e.born_round = field<int64_t>(j, "born_round");
  e.born_phase = parsePhase(field<std::string>(j, "born_phase"));
  e.died_round = field<int64_t>(j, "died_round");
  e.died_phase = parsePhase(field<std::string>(j, "died_phase"));
  e.reason = parseDeathReason(field<std::string>(j, "reason"));
  e.row = field<int64_t>(j, "row");
  if (j.contains("padding")) e.padding = field<bool>(j, "padding");
  return e;
}

json toJson(const Metrics& m) {
  return {{"rounds", m.rounds},
          {"generated", m.generated},
          {"drafted", m.drafted},
          {"accepted", m.accepted},
          {"alpha", m.alpha},
          {"mean_accepted_length", m.mean_accepted_length},
          {"mean_accepted_length_note", "tokens appended per round, including the correction or bonus token"},
          {"mean_gamma", m.mean_gamma},
          {"acceptance_at_position", m.acceptance_at_position},
          {"target_calls", m.target_forwards},
          {"drafter_calls", m.drafter_forwards},
          {"target_ms", m.target_ms},
          {"drafter_ms", m.drafter_ms},
          {"total_ms", m.total_ms},
          {"cost_ratio", m.cost_ratio},
          {"theoretical_speedup", m.theoretical_speedup}};
}

}  // namespace kvscope
