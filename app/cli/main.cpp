// kvscope-cli: the headless driver of the kvscope core. Subcommands live in
// app/cli/cmd_*.cpp and register themselves (command_registry.h).
#include <exception>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "app/cli/command_registry.h"
#include "core/runtime/allocator_tuning.h"
#include "core/runtime/threads.h"
#include "core/error.h"
#include "core/error_text.h"
#include "core/runtime/exception_text.h"

namespace kvscope::cli {

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
  out << "\nWithout --model/--target/--drafter, commands use the bundled models. Every command prints a\n"
         "report for people; with --json it prints the same result as one JSON object on the last line of\n"
         "stdout instead, for scripts (run --json streams one object per round before it).\n";
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
    // Errors quote what they refuse, often from the file: clipped and with
    // control and bidi characters escaped, so a hostile file can neither
    // flood nor rewrite the terminal.
    std::cerr << "kvscope-cli " << name << ": error: " << kvscope::displayableError(error.what()) << "\n";
    return 2;
  } catch (const std::filesystem::filesystem_error& error) {
    // A path the user or the file gave that the system refuses (too long, a
    // loop, no permission): a refusal of that input, not a fault of kvscope.
    std::cerr << "kvscope-cli " << name << ": error: " << kvscope::displayableError(error.what()) << "\n";
    return 2;
  } catch (const std::exception& error) {
    // libtorch or the standard library: still an error message (without
    // libtorch's backtrace), not a crash.
    std::cerr << "kvscope-cli " << name << ": internal error: " << kvscope::exceptionText(error) << "\n";
    return 3;
  }
}
