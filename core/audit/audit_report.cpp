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
  }
  return "?";
}

RowState parseRowState(const std::string& name) {
  for (RowState s : {RowState::Ok, RowState::Stale, RowState::Missing, RowState::Duplicate, RowState::WrongPosition,
                     RowState::WrongValues}) {
    if (name == rowStateName(s)) return s;
  }
  throw Error("unknown row state '" + name + "'");
}

const char* positionClassName(PositionClass c) {
  switch (c) {
    case PositionClass::Agree: return "agree";
    case PositionClass::Noise: return "noise";
    case PositionClass::Divergent: return "divergent";
  }
  return "?";
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
  a.max_value_error = get<double>(j, "max_value_error");
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

nlohmann::json toJson(const RootCause& c) {
  nlohmann::json verdicts = nlohmann::json::array();
  for (const RowVerdict& v : c.verdicts) verdicts.push_back(toJson(v));
  return {{"event", c.event_index},         {"cache", cacheRoleName(c.cache)},
          {"round", c.round},               {"phase", phaseName(c.phase)},
          {"operation", cacheEventKindName(c.operation)},
          {"expected_rows", c.expected_rows}, {"actual_rows", c.actual_rows},
          {"layers", c.layers},             {"rows", c.rows},
          {"row_details", verdicts},        {"fault_action", c.fault_action},
          {"what", c.what}};
}

RootCause rootCauseFromJson(const nlohmann::json& j) {
  try {
    RootCause c;
    c.event_index = j.at("event").get<int64_t>();
    c.cache = parseCacheRole(j.at("cache").get<std::string>());
    c.round = j.at("round").get<int64_t>();
    c.phase = parsePhase(j.at("phase").get<std::string>());
    c.operation = parseCacheEventKind(j.at("operation").get<std::string>());
    c.expected_rows = j.at("expected_rows").get<int64_t>();
    c.actual_rows = j.at("actual_rows").get<int64_t>();
    c.layers = j.at("layers").get<std::vector<int64_t>>();
    c.rows = j.at("rows").get<std::vector<int64_t>>();
    c.fault_action = j.at("fault_action").get<std::string>();
    c.what = j.at("what").get<std::string>();
    nlohmann::json audit = {{"cache", "target"}, {"round", 0}, {"phase", "prefill"}, {"expected_rows", 0},
                            {"rows_per_layer", nlohmann::json::array()}, {"values_checked", false}, {"ok_rows", 0},
                            {"max_value_error", 0.0}, {"rows", j.at("row_details")}};
    c.verdicts = cacheAuditFromJson(audit).rows;
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("root cause: malformed record (") + e.what() + ")");
  }
}

std::string DiffReport::explanation() const {
  std::string out;
  if (first_divergence) {
    out = "diverged at round " + std::to_string(first_divergence->round) + " position " +
          std::to_string(first_divergence->position) + " (" + cacheRoleName(first_divergence->cache) + " " +
          phaseName(first_divergence->phase) + ")";
  } else if (root_cause) {
    out = "outputs stay within numerical noise";
  } else {
    return "no divergence and every cache operation kept the contract";
  }
  if (root_cause) out += (first_divergence ? " because " : ", but ") + root_cause->what;
  if (eviction_cause && !root_cause) out += " after an intended eviction: " + eviction_cause->what;
  return out;
}

nlohmann::json toJson(const EvictionCause& c) {
  return {{"event", c.event_index},  {"cache", cacheRoleName(c.cache)}, {"round", c.round},
          {"phase", phaseName(c.phase)}, {"policy", c.policy},        {"masked_rows", c.masked},
          {"evictions", c.evictions}, {"what", c.what}};
}

namespace {
EvictionCause evictionCauseFromJson(const nlohmann::json& j) {
  EvictionCause c;
  c.event_index = j.at("event").get<int64_t>();
  c.cache = parseCacheRole(j.at("cache").get<std::string>());
  c.round = j.at("round").get<int64_t>();
  c.phase = parsePhase(j.at("phase").get<std::string>());
  c.policy = j.at("policy").get<std::string>();
  c.masked = j.at("masked_rows").get<int64_t>();
  c.evictions = j.at("evictions").get<int64_t>();
  c.what = j.at("what").get<std::string>();
  return c;
}
}  // namespace

namespace {
nlohmann::json optionalInt(const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
std::optional<int64_t> intOrNull(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<int64_t>();
}
}  // namespace

nlohmann::json toJson(const DiffReport& r, bool include_positions) {
  nlohmann::json j = {{"mode", r.mode},
                      {"diverged", r.diverged()},
                      {"failed", r.failed()},
                      {"agree_positions", r.agree},
                      {"noise_positions", r.noise},
                      {"divergent_positions", r.divergent},
                      {"max_abs_logit_diff", r.max_abs_logit_diff},
                      {"top1_flips", r.top1_flips},
                      {"min_top2_margin", r.min_top2_margin},
                      {"explanation", r.explanation()}};
  if (r.first_divergence) {
    const FirstDivergence& f = *r.first_divergence;
    j["first_divergence"] = {{"cache", cacheRoleName(f.cache)}, {"round", f.round}, {"phase", phaseName(f.phase)},
                             {"position", f.position}, {"layer", optionalInt(f.layer)}, {"head", optionalInt(f.head)},
                             {"row", optionalInt(f.row)}};
  } else {
    j["first_divergence"] = nullptr;
  }
  j["root_cause"] = r.root_cause ? toJson(*r.root_cause) : nlohmann::json(nullptr);
  if (r.eviction_cause) j["eviction_cause"] = toJson(*r.eviction_cause);
  if (r.audit_at_divergence) j["audit_at_divergence"] = toJson(*r.audit_at_divergence, include_positions);
  if (r.mode == "free") {
    j["first_token_divergence"] = r.first_token_divergence < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.first_token_divergence);
    j["cached_tokens"] = r.cached_tokens;
    j["uncached_tokens"] = r.uncached_tokens;
  }
  if (include_positions) {
    nlohmann::json positions = nlohmann::json::array();
    for (const PositionDiff& d : r.positions) {
      positions.push_back({{"cache", cacheRoleName(d.cache)}, {"round", d.round}, {"position", d.position},
                           {"max_abs_logit_diff", d.max_abs_logit_diff}, {"kl", d.kl}, {"top1_agree", d.top1_agree},
                           {"top1_cached", d.top1_cached}, {"top1_uncached", d.top1_uncached},
                           {"top2_margin", d.top2_margin}, {"class", positionClassName(d.verdict)}});
    }
    j["positions"] = positions;
  }
  return j;
}

DiffReport diffReportFromJson(const nlohmann::json& j) {
  try {
    DiffReport r;
    r.mode = j.at("mode").get<std::string>();
    r.agree = j.at("agree_positions").get<int64_t>();
    r.noise = j.at("noise_positions").get<int64_t>();
    r.divergent = j.at("divergent_positions").get<int64_t>();
    r.max_abs_logit_diff = j.at("max_abs_logit_diff").get<double>();
    r.top1_flips = j.at("top1_flips").get<int64_t>();
    r.min_top2_margin = j.at("min_top2_margin").get<double>();
    if (!j.at("first_divergence").is_null()) {
      const auto& f = j.at("first_divergence");
      FirstDivergence first;
      first.cache = parseCacheRole(f.at("cache").get<std::string>());
      first.round = f.at("round").get<int64_t>();
      first.phase = parsePhase(f.at("phase").get<std::string>());
      first.position = f.at("position").get<int64_t>();
      first.layer = intOrNull(f, "layer");
      first.head = intOrNull(f, "head");
      first.row = intOrNull(f, "row");
      r.first_divergence = first;
    }
    if (j.contains("root_cause") && !j.at("root_cause").is_null()) r.root_cause = rootCauseFromJson(j.at("root_cause"));
    if (j.contains("eviction_cause")) r.eviction_cause = evictionCauseFromJson(j.at("eviction_cause"));
    if (j.contains("audit_at_divergence")) r.audit_at_divergence = cacheAuditFromJson(j.at("audit_at_divergence"));
    if (j.contains("positions")) {
      for (const auto& p : j.at("positions")) {
        PositionDiff d;
        d.cache = parseCacheRole(p.at("cache").get<std::string>());
        d.round = p.at("round").get<int64_t>();
        d.position = p.at("position").get<int64_t>();
        d.max_abs_logit_diff = p.at("max_abs_logit_diff").get<double>();
        d.kl = p.at("kl").get<double>();
        d.top1_agree = p.at("top1_agree").get<bool>();
        d.top1_cached = p.value("top1_cached", int64_t{0});
        d.top1_uncached = p.value("top1_uncached", int64_t{0});
        d.top2_margin = p.at("top2_margin").get<double>();
        const std::string c = p.at("class").get<std::string>();
        d.verdict = c == "agree" ? PositionClass::Agree : c == "noise" ? PositionClass::Noise : PositionClass::Divergent;
        r.positions.push_back(d);
      }
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("diff report: malformed record (") + e.what() + ")");
  }
}

}  // namespace kvscope
