#include "core/audit/audit_report.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace/trace_json.h"

namespace kvscope {

const char* rowStateName(RowState state) {
  switch (state) {
    case RowState::Ok: return "ok";
    case RowState::Stale: return "stale";
    case RowState::Missing: return "missing";
    case RowState::Duplicate: return "duplicate";
    case RowState::WrongPosition: return "wrong_position";
    case RowState::WrongValues: return "wrong_values";
    case RowState::Padding: return "padding";
  }
  return "?";
}

RowState parseRowState(const std::string& name) {
  for (RowState s : {RowState::Ok, RowState::Stale, RowState::Missing, RowState::Duplicate, RowState::WrongPosition,
                     RowState::WrongValues, RowState::Padding}) {
    if (name == rowStateName(s)) return s;
  }
  throw Error("unknown row state '" + name + "'");
}

nlohmann::json toJson(const RowVerdict& v) {
  auto optional = [](const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); };
  return {{"cache", cacheRoleName(v.cache)}, {"layer", v.layer},          {"row", v.row},
          {"entry", v.entry},                {"position", v.position},    {"rope_position", v.rope_position},
          {"token", v.token},                {"state", rowStateName(v.state)},
          {"max_abs_dk", optional(v.max_abs_dk)}, {"max_abs_dv", optional(v.max_abs_dv)},
          {"worst_head", v.worst_head}};
}

nlohmann::json toJson(const CacheAudit& a, bool include_matrix) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RowVerdict& v : a.rows) rows.push_back(toJson(v));
  nlohmann::json j = {{"cache", cacheRoleName(a.cache)},   {"round", a.moment.round},
                      {"phase", phaseName(a.moment.phase)}, {"ok", a.clean()},
                      {"expected_rows", a.expected_rows},   {"rows_per_layer", a.rows_per_layer},
                      {"values_checked", a.values_checked}, {"ok_rows", a.ok_rows},
                      {"max_value_error", a.max_value_error}, {"rows", rows}};
  if (!a.expected_first.empty()) j["expected_first"] = a.expected_first;
  if (a.not_comparable_after_eviction > 0) j["not_comparable_after_eviction"] = a.not_comparable_after_eviction;
  if (a.padding_rows > 0) j["padding_rows"] = a.padding_rows;
  if (!a.dangling_blocks.empty()) j["dangling_blocks"] = toJson(a.dangling_blocks);
  if (include_matrix) {
    nlohmann::json matrix = nlohmann::json::array();  // null: identity broken or not checked
    for (const auto& layer : a.error) {
      nlohmann::json row = nlohmann::json::array();
      for (double e : layer) row.push_back(std::isfinite(e) ? nlohmann::json(e) : nlohmann::json(nullptr));
      matrix.push_back(row);
    }
    j["error"] = matrix;
  }
  return j;
}

namespace {
template <typename T>
T get(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) throw Error(std::string("audit: missing field '") + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(std::string("audit: field '") + key + "' has the wrong type");
  }
}
std::optional<double> optionalNumber(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return get<double>(j, key);
}
}  // namespace

CacheAudit cacheAuditFromJson(const nlohmann::json& j) {
  CacheAudit a;
  a.cache = get<std::string>(j, "cache") == "drafter" ? CacheRole::Drafter : CacheRole::Target;
  a.moment.round = get<int64_t>(j, "round");
  const std::string phase = get<std::string>(j, "phase");
  for (Phase p : {Phase::Prefill, Phase::Draft, Phase::Verify, Phase::Accept, Phase::Prune}) {
    if (phase == phaseName(p)) a.moment.phase = p;
  }
  a.expected_rows = get<int64_t>(j, "expected_rows");
  a.rows_per_layer = get<std::vector<int64_t>>(j, "rows_per_layer");
  if (j.contains("expected_first")) a.expected_first = get<std::vector<int64_t>>(j, "expected_first");
  a.values_checked = get<bool>(j, "values_checked");
  a.ok_rows = get<int64_t>(j, "ok_rows");
  if (j.contains("padding_rows")) a.padding_rows = get<int64_t>(j, "padding_rows");
  a.max_value_error = get<double>(j, "max_value_error");
  if (j.contains("dangling_blocks")) a.dangling_blocks = danglingBlocksFromJson(j.at("dangling_blocks"));
  for (const auto& r : get<nlohmann::json>(j, "rows")) {
    RowVerdict v;
    v.cache = get<std::string>(r, "cache") == "drafter" ? CacheRole::Drafter : CacheRole::Target;
    v.layer = get<int64_t>(r, "layer");
    v.row = get<int64_t>(r, "row");
    v.entry = get<int64_t>(r, "entry");
    v.position = get<int64_t>(r, "position");
    v.rope_position = get<int64_t>(r, "rope_position");
    v.token = get<int64_t>(r, "token");
    v.state = parseRowState(get<std::string>(r, "state"));
    v.max_abs_dk = optionalNumber(r, "max_abs_dk");
    v.max_abs_dv = optionalNumber(r, "max_abs_dv");
    v.worst_head = get<int64_t>(r, "worst_head");
    a.rows.push_back(v);
  }
  if (j.contains("error") && j.at("error").is_array()) {
    for (const auto& layer : j.at("error")) {
      std::vector<double> row;
      for (const auto& e : layer) row.push_back(e.is_number() ? e.get<double>() : std::numeric_limits<double>::infinity());
      a.error.push_back(std::move(row));
    }
  }
  return a;
}

}  // namespace kvscope
