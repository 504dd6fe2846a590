// kvscope-cli: the headless driver of the kvscope core. Subcommands live in
// app/cli/cmd_*.cpp and register themselves (command_registry.h).
#include <exception>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "app/cli/command_registry.h"
#include "core/runtime/allocator_tuning.h"
#include "core/runtime/threads.h"
#include "core/error.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope::cli {

namespace {
// An error names what it refused, and names often come from the file (a
// tensor, a key, a model): each line is printed with its control characters
// escaped, so a hostile file cannot colour, move or clear the terminal.
std::string printableMessage(const std::string& message) {
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t end = message.find('\n', start);
    out += visibleText(message.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    out += '\n';
    start = end + 1;
  }
}
}  // namespace

std::map<std::string, CommandEntry>& commandRegistry() {
  static std::map<std::string, CommandEntry> registry;
  return registry;
}

}  // namespace kvscope::cli

namespace {

// Options that never take a value.
const std::set<std::string> kFlags = {"json", "ignore-eos", "greedy", "adaptive", "resume", "no-baseline", "quick", "sweep", "require-model"};

void printUsage(std::ostream& out) {
  out << "usage: kvscope-cli COMMAND [options]   (kvscope-cli COMMAND --help: that command alone)\n\ncommands:\n";
  for (const auto& [name, entry] : kvscope::cli::commandRegistry()) out << "  " << entry.usage << "\n";
  out << "\nWithout --model/--target/--drafter, commands use the bundled models. --json prints the result\n"
         "as one JSON object on the last line of stdout, for scripts, without the text report; without\n"
         "it, run, check, make-model and export-gguf print the report alone and the other commands end\n"
         "the report with that line.\n";
}

// `kvscope-cli COMMAND --help` (or -h): the command's usage, every option it
// takes, from its registration (the same text `kvscope-cli --help` lists).
void printCommandUsage(std::ostream& out, const kvscope::cli::CommandEntry& entry) {
  const auto& registry = kvscope::cli::commandRegistry();
  out << "usage: kvscope-cli " << entry.usage << "\n";
  // diff and audit take run's session options: named where run names them.
  if (entry.usage.find("<run options>") != std::string::npos) {
    out << "\n<run options>, as for run:\n  kvscope-cli " << registry.at("run").usage << "\n";
  }
}

bool asksForHelp(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_pattern("[%l] %v");
  spdlog::set_level(spdlog::level::warn);
  const bool help = argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
                                  std::string(argv[1]) == "help");
  if (argc < 2 || (help && argc == 2)) {
    printUsage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  // `kvscope-cli help COMMAND` as `kvscope-cli COMMAND --help`.
  const std::string name = help ? argv[2] : argv[1];
  const auto& registry = kvscope::cli::commandRegistry();
  const auto it = registry.find(name);
  if (it == registry.end()) {
    std::cerr << "kvscope-cli: unknown command '" << name << "'\n";
    printUsage(std::cerr);
    return 2;
  }
  // Before the command reads anything: its help needs none of its required options.
  if (help || asksForHelp(argc, argv)) {
    printCommandUsage(std::cout, it->second);
    return 0;
  }
  kvscope::useMachineThreads();
  kvscope::keepTensorMemoryForReuse();
  try {
    kvscope::cli::Args args(std::vector<std::string>(argv + 2, argv + argc), kFlags);
    return it->second.run(args);
  } catch (const kvscope::Error& error) {
    std::cerr << "kvscope-cli " << name << ": error: " << kvscope::cli::printableMessage(error.what()) << "\n";
    return 2;
  } catch (const std::exception& error) {
    // libtorch or the standard library: still an error message, not a crash.
    std::cerr << "kvscope-cli " << name << ": internal error: " << kvscope::cli::printableMessage(error.what()) << "\n";
    return 3;
  }
}
