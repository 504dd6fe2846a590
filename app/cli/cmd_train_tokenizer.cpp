// kvscope-cli train-tokenizer: learns a byte-level BPE tokenizer from a text
// file and writes tokenizer.json + tokenizer_config.json.
#include <chrono>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/train/bpe_trainer.h"

namespace kvscope::cli {

namespace {

int runTrainTokenizer(Args& args) {
  const bool json = args.flag("json");
  const std::string corpus_path = args.required("corpus");
  const std::string out = args.required("out");
  BpeTrainerOptions options;
  options.vocab_size = args.integer("vocab", 4096);
  options.min_pair_count = args.integer("min-pair-count", 2);
  options.bos_token = args.value("bos-token").value_or(options.bos_token);
  options.eos_token = args.value("eos-token").value_or(options.eos_token);
  args.finish();

  const std::string text = readFileBytes(corpus_path);
  if (text.empty()) throw Error(corpus_path + ": the corpus is empty");
  const auto started = std::chrono::steady_clock::now();
  const BpeVocabulary vocab = trainByteLevelBpe(text, options);
  writeTokenizerFiles(vocab, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // Check the written file: it must load and give back the corpus exactly.
  const auto tokenizer = Tokenizer::fromDirectory(out);
  const auto ids = tokenizer->encode(text, /*add_special_tokens=*/false);
  const bool round_trip = tokenizer->decode(ids) == text;
  if (!round_trip) throw Error(out + ": the trained tokenizer does not round-trip the corpus");
  const double bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(std::max<size_t>(1, ids.size()));
  if (!json) {
    std::cout << "wrote " << out << "/tokenizer.json: " << vocab.tokens.size() << " tokens (" << vocab.merges.size()
              << " merges), " << ids.size() << " corpus tokens, " << bytes_per_token << " bytes/token, round trip ok, "
              << seconds << " s\n";
  }
  if (json) printJson({{"out", out},
                       {"vocab_size", vocab.tokens.size()},
                       {"merges", vocab.merges.size()},
                       {"bos_id", vocab.bos_id},
                       {"eos_id", vocab.eos_id},
                       {"corpus_bytes", text.size()},
                       {"corpus_tokens", ids.size()},
                       {"round_trip", round_trip},
                       {"seconds", seconds}});
  return 0;
}

const CommandRegistrar kRegister{"train-tokenizer",
    "train-tokenizer --corpus FILE --vocab N --out DIR [--min-pair-count C] [--bos-token S --eos-token S] [--json]",
    runTrainTokenizer};

}  // namespace
}  // namespace kvscope::cli
