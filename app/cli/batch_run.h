#pragma once
// kvscope-cli run with several prompts: every sequence decoded together
// (core/decode/batch_session.h), one JSON line per sequence and round and a
// result with one object per sequence under "sequences" (--json), or each
// sequence's coloured text and acceptance figures.
#include <optional>
#include <string>

#include "app/cli/session_setup.h"

namespace kvscope::cli {

struct BatchRunOutput {
  bool json = false;
  std::optional<std::string> trace_path;
  std::optional<std::string> capture_path;
  bool baseline = true;
};

int runBatch(const SessionSetup& setup, const BatchRunOutput& output);

}  // namespace kvscope::cli
