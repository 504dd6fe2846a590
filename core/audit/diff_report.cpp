#include "core/audit/diff_report.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace/trace_json.h"

namespace kvscope {

const char* positionClassName(PositionClass c) {
  switch (c) {
    case PositionClass::Agree: return "agree";
    case PositionClass::Noise: return "noise";
    case PositionClass::Divergent: return "divergent";
  }
  return "?";
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
