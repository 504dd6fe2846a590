#pragma once
// A diff report read from a file is held against the trace it came with
// before any view reads it: every round, moment, event, layer, physical row,
// ledger entry and position it names must lie within what the trace
// recorded, because the views size their plots and maps by them (an audit
// row of 400,000,000 would allocate gigabytes). Whatever does not fit is
// dropped, and each drop is one warning naming the field and the value.
#include <string>
#include <vector>

#include "core/audit/diff_report.h"
#include "core/trace/session_record.h"

namespace kvscope {

// Returns the warnings; `report` keeps only what fits `record`.
std::vector<std::string> fitInvestigation(DiffReport& report, const SessionRecord& record);

}  // namespace kvscope
