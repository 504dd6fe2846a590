#pragma once
// One function per kvscope-cli subcommand; each returns the exit code.
#include "app/cli/args.h"

namespace kvscope::cli {

int runInspect(Args& args);
int runTokenize(Args& args);
int runDetokenize(Args& args);
int runLogits(Args& args);
int runGenerate(Args& args);

}  // namespace kvscope::cli
