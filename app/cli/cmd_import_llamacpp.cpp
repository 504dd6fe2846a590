// kvscope-cli import-llamacpp LOG.json --out FILE.kvcapture [--json]
// A llama.cpp run recorded by interop/llamacpp/recorder.mjs (or a C program
// writing the same log) as a capture `kvscope-cli check` reads
// (core/capture/llamacpp_capture.h, docs/llamacpp.md).
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/capture/llamacpp_capture.h"
#include "core/error.h"

namespace kvscope::cli {

namespace {

int runImportLlamacpp(Args& args) {
  const bool json = args.flag("json");
  if (args.positional().size() != 1) throw Error("usage: kvscope-cli import-llamacpp LOG.json --out FILE.kvcapture [--json]");
  const std::string out = args.required("out");
  args.finish();
  const auto r = importLlamaCapture(args.positional()[0], out);
  if (!json) {
    std::cout << "wrote " << out << ": target " << r.target_calls << " calls, drafter " << r.drafter_calls << " calls, "
              << r.erases << " erases, " << r.cache_type << " cache\n";
  }
  if (json) {
    printJson({{"out", out},
               {"calls", {{"target", r.target_calls}, {"drafter", r.drafter_calls}}},
               {"erases", r.erases},
               {"cache_type", r.cache_type}});
  }
  return 0;
}

const CommandRegistrar kRegister{"import-llamacpp",
                                 "import-llamacpp LOG.json --out FILE.kvcapture [--json]\n"
                                 "      (a llama.cpp run recorded by interop/llamacpp/recorder.mjs, as a capture for check)",
                                 runImportLlamacpp};

}  // namespace
}  // namespace kvscope::cli
