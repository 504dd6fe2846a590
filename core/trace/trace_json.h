#pragma once
// JSON forms of the trace records (for --json output and the trace file).
#include <nlohmann/json.hpp>

#include "core/cache/cache_event_log.h"
#include "core/trace/metrics.h"
#include "core/trace/trace_types.h"

namespace kvscope {

nlohmann::json toJson(const CacheEvent& event);
nlohmann::json toJson(const RoundRecord& round);
nlohmann::json toJson(const LedgerEntry& entry);
nlohmann::json toJson(const Metrics& metrics);
nlohmann::json toJson(const std::vector<DanglingBlock>& blocks);

// Inverse conversions; throw Error naming the field on malformed input.
RoundRecord roundFromJson(const nlohmann::json& j);
LedgerEntry ledgerEntryFromJson(const nlohmann::json& j);
CacheEvent cacheEventFromJson(const nlohmann::json& j);
std::vector<DanglingBlock> danglingBlocksFromJson(const nlohmann::json& j);

Phase parsePhase(const std::string& name);
CacheRole parseCacheRole(const std::string& name);
TokenOrigin parseTokenOrigin(const std::string& name);
DeathReason parseDeathReason(const std::string& name);

}  // namespace kvscope
