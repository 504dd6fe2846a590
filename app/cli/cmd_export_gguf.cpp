// kvscope-cli export-gguf --model DIR --out FILE.gguf [--dtype f32|f16] [--json]
// Writes a checkpoint as a GGUF file llama.cpp loads (core/gguf/gguf_export.h).
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/gguf/gguf_export.h"

namespace kvscope::cli {

namespace {

GgufExportDType parseExportDType(const std::string& name) {
  if (name == "f32") return GgufExportDType::F32;
  if (name == "f16") return GgufExportDType::F16;
  throw Error("--dtype must be f32 or f16, not '" + name + "'");
}

int runExportGguf(Args& args) {
  const bool json = args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  const std::string out = args.required("out");
  const std::string dtype = args.value("dtype").value_or("f32");
  args.finish();
  const GgufExportReport r = exportGguf(dir, out, parseExportDType(dtype));
  if (!json) {
    std::cout << "wrote " << out << ": llama.cpp architecture " << r.architecture << ", " << r.tensors << " tensors ("
              << dtype << "), tokenizer " << r.tokenizer << " with " << r.tokens << " tokens, " << r.bytes << " bytes\n";
    for (const auto& note : r.notes) std::cout << "  " << note << "\n";
  }
  if (json) {
    printJson({{"out", out},
               {"architecture", r.architecture},
               {"dtype", dtype},
               {"tensors", r.tensors},
               {"tokenizer", r.tokenizer},
               {"tokens", r.tokens},
               {"bytes", r.bytes},
               {"notes", r.notes}});
  }
  return 0;
}

const CommandRegistrar kRegister{"export-gguf",
                                 "export-gguf [--model DIR] --out FILE.gguf [--dtype f32|f16] [--json]\n"
                                 "      (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Phi-3, GPT-2 as a GGUF llama.cpp loads)",
                                 runExportGguf};

}  // namespace
}  // namespace kvscope::cli
