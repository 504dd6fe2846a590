#pragma once
// The human-readable summary of a `kvscope-cli bench` report (its JSON).
#include <ostream>

#include <nlohmann/json.hpp>

namespace kvscope::cli {

void printBenchSummary(std::ostream& out, const nlohmann::json& report);

}  // namespace kvscope::cli
