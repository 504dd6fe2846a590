#include "core/audit/root_cause_report.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace/trace_json.h"

namespace kvscope {

nlohmann::json toJson(const RootCause& c) {
  nlohmann::json verdicts = nlohmann::json::array();
  for (const RowVerdict& v : c.verdicts) verdicts.push_back(toJson(v));
  nlohmann::json out = {{"event", c.event_index},
          {"cache", cacheRoleName(c.cache)},
          {"role", cacheRoleName(c.cache)},
          {"sequence", c.sequence},
          {"round", c.round},
          {"phase", phaseName(c.phase)},
          {"call", c.call >= 0 ? nlohmann::json(c.call) : nlohmann::json()},
          {"step", c.forward() ? "forward" : "between"},
          {"operation", c.state_operation.empty() ? cacheEventKindName(c.operation) : c.state_operation},
          {"kind", c.kind},
          {"expected_rows", c.expected_rows},
          {"actual_rows", c.actual_rows},
          {"layers", c.layers},
          {"rows", c.rows},
          {"row_details", verdicts},
          {"fault_action", c.fault_action},
          {"what", c.what}};
  if (!c.state_kind.empty()) out["state"] = c.state_kind;  // a recurrent state's breach only
  if (!c.dangling_blocks.empty()) out["dangling_blocks"] = toJson(c.dangling_blocks);  // kind "block" only
  if (c.overwritten_by >= 0) out["overwritten_by"] = c.overwritten_by;                 // kind "overwritten" only
  return out;
}

RootCause rootCauseFromJson(const nlohmann::json& j) {
  try {
    RootCause c;
    c.event_index = j.at("event").get<int64_t>();
    c.cache = parseCacheRole(j.at("cache").get<std::string>());
    c.round = j.at("round").get<int64_t>();
    c.phase = parsePhase(j.at("phase").get<std::string>());
    const std::string operation = j.at("operation").get<std::string>();
    if (operation == "restore") {  // a recurrent state's breach (RootCause::state_operation)
      c.state_operation = operation;
      c.state_kind = j.value("state", std::string());
    } else {
      c.operation = parseCacheEventKind(operation);
    }
    c.expected_rows = j.at("expected_rows").get<int64_t>();
    c.actual_rows = j.at("actual_rows").get<int64_t>();
    c.layers = j.at("layers").get<std::vector<int64_t>>();
    c.rows = j.at("rows").get<std::vector<int64_t>>();
    c.fault_action = j.at("fault_action").get<std::string>();
    c.what = j.at("what").get<std::string>();
    // Written since the one walker (traces before it lack them).
    c.kind = j.value("kind", std::string());
    c.call = j.contains("call") && !j.at("call").is_null() ? j.at("call").get<int64_t>() : -1;
    c.sequence = j.value("sequence", int64_t{0});
    if (j.contains("dangling_blocks")) c.dangling_blocks = danglingBlocksFromJson(j.at("dangling_blocks"));
    c.overwritten_by = j.value("overwritten_by", int64_t{-1});
    if (c.overwritten_by < -1) throw Error("root cause: a negative overwritten_by");
    if (c.sequence < 0 || c.call < -1) throw Error("root cause: a negative sequence or call");
    nlohmann::json audit = {{"cache", "target"}, {"round", 0}, {"phase", "prefill"}, {"expected_rows", 0},
                            {"rows_per_layer", nlohmann::json::array()}, {"values_checked", false}, {"ok_rows", 0},
                            {"max_value_error", 0.0}, {"rows", j.at("row_details")}};
    c.verdicts = cacheAuditFromJson(audit).rows;
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("root cause: malformed record (") + e.what() + ")");
  }
}

nlohmann::json toJson(const EvictionCause& c) {
  return {{"event", c.event_index},  {"cache", cacheRoleName(c.cache)}, {"round", c.round},
          {"phase", phaseName(c.phase)}, {"policy", c.policy},        {"masked_rows", c.masked},
          {"evictions", c.evictions}, {"what", c.what}};
}

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

}  // namespace kvscope
