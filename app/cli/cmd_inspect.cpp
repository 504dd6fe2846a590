// kvscope-cli inspect DIR: architecture, sizes, parameter count, tensors.
#include <filesystem>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/model/checkpoint.h"
#include "core/model/model_bundle.h"

namespace kvscope::cli {

namespace {

int runInspect(Args& args) {
  const bool json = args.flag("json");
  if (args.positional().size() != 1) throw Error("usage: kvscope-cli inspect DIR [--weights stored|fp32] [--json]");
  const WeightResidency weights = weightResidency(args);
  args.finish();
  const std::string dir = args.positional()[0];
  const ModelBundle bundle = loadModelBundle(dir, computeOptions(), weights);
  const ModelConfig& c = bundle.model->config();
  const Checkpoint ckpt = Checkpoint::open(dir);

  nlohmann::json tensors = nlohmann::json::array();
  for (const std::string& name : ckpt.names()) {
    const StTensorInfo& info = ckpt.info(name);
    tensors.push_back({{"name", name},
                       {"dtype", stDTypeName(info.dtype)},
                       {"shape", info.shape},
                       {"file", std::filesystem::path(ckpt.fileOf(name)).filename().string()}});
  }
  nlohmann::json result = {{"dir", dir},
                           {"architecture", c.architecture_name},
                           {"model_type", c.model_type},
                           {"layers", c.num_layers},
                           {"hidden_size", c.hidden_size},
                           {"heads", c.num_heads},
                           {"kv_heads", c.num_kv_heads},
                           {"head_dim", c.head_dim},
                           {"intermediate_size", c.intermediate_size},
                           {"vocab_size", c.vocab_size},
                           {"context_length", c.contextLength()},
                           {"tie_word_embeddings", c.tie_word_embeddings},
                           {"parameters", bundle.model->parameterCount()},
                           {"tokenizer_vocab", bundle.has_tokenizer ? nlohmann::json(bundle.tokenizer->vocabSize()) : nlohmann::json()},
                           {"eos_ids", bundle.eos_ids},
                           {"tensors", tensors}};
  if (!json) {
    std::cout << dir << "\n  " << describe(c) << "\n  parameters: " << bundle.model->parameterCount()
              << "\n  tokenizer: "
              << (bundle.has_tokenizer ? std::to_string(bundle.tokenizer->vocabSize()) + " ids"
                                       : std::string("none (prompts as ids, tokens shown as <id N>)"))
              << "\n  tensors (" << tensors.size()
              << "):\n";
    for (const auto& t : tensors) {
      std::cout << "    " << t["name"].get<std::string>() << "  " << t["dtype"].get<std::string>() << " "
                << t["shape"].dump() << "\n";
    }
  }
  if (json) printJson(result);
  return 0;
}

const CommandRegistrar kRegister{"inspect", "inspect DIR [--weights stored|fp32] [--json]", runInspect};

}  // namespace
}  // namespace kvscope::cli
