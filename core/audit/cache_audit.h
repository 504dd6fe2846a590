#pragma once
// The cache audit at any recorded moment: align each cache's physical rows
// (replayed from the cache event log) with the rows the bookkeeping expects,
// and classify every row: ok, stale (should have been removed), missing,
// duplicate, wrong position (a valid row in the wrong slot, or rotated for
// the wrong position) or wrong values (max |dK|, |dV| per head against a
// from-scratch recomputation). Without a model, only identities are checked.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/audit/audit_report.h"
#include "core/model/causal_lm.h"
#include "core/trace/session_record.h"

namespace kvscope {

// model: the cache's model, or null (identities only).
CacheAudit auditAt(const SessionRecord& record, CacheRole cache, const Moment& moment, const CausalLM* model,
                   const AuditTolerance& tolerance = {});

}  // namespace kvscope
