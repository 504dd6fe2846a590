// kvscope-cli: the headless driver of the kvscope core.
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "core/error.h"

namespace {

using Command = std::function<int(kvscope::cli::Args&)>;

struct CommandEntry {
  Command run;
  const char* usage;
};

const std::map<std::string, CommandEntry>& commands() {
  using namespace kvscope::cli;
  static const std::map<std::string, CommandEntry> table = {
      {"inspect", {runInspect, "inspect DIR [--json]"}},
      {"tokenize", {runTokenize, "tokenize [--model DIR] (--text T | --text-file F)"}},
      {"detokenize", {runDetokenize, "detokenize [--model DIR] --ids 1,2,3"}},
      {"logits", {runLogits, "logits [--model DIR] --ids 1,2,3 --mode nocache|cached|prefill_then_step"}},
      {"generate",
       {runGenerate,
        "generate [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) --max-new N [--cache on|off] [--ignore-eos]\n"
        "           [--greedy | --temperature T --top-k K --top-p P] [--seed S] [--json]"}},
  };
  return table;
}

// Options that never take a value.
const std::set<std::string> kFlags = {"json", "ignore-eos", "greedy", "adaptive", "resume", "help"};

void printUsage(std::ostream& out) {
  out << "usage: kvscope-cli COMMAND [options]\n\ncommands:\n";
  for (const auto& [name, entry] : commands()) out << "  " << entry.usage << "\n";
  out << "\nWithout --model, commands use the bundled target model. With --json, the last line of stdout\n"
         "is one JSON object.\n";
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_pattern("[%l] %v");
  spdlog::set_level(spdlog::level::warn);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    printUsage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const auto it = commands().find(name);
  if (it == commands().end()) {
    std::cerr << "kvscope-cli: unknown command '" << name << "'\n";
    printUsage(std::cerr);
    return 2;
  }
  try {
    kvscope::cli::Args args(std::vector<std::string>(argv + 2, argv + argc), kFlags);
    return it->second.run(args);
  } catch (const kvscope::Error& error) {
    std::cerr << "kvscope-cli " << name << ": error: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    // libtorch or the standard library: still an error message, not a crash.
    std::cerr << "kvscope-cli " << name << ": internal error: " << error.what() << "\n";
    return 3;
  }
}
