#pragma once
// kvscope-cli subcommands register themselves here, one file per command:
//   static const CommandRegistrar kRegister{"inspect", "inspect DIR [--json]", runInspect};
#include <functional>
#include <map>
#include <string>

#include "app/cli/args.h"

namespace kvscope::cli {

struct CommandEntry {
  std::function<int(Args&)> run;  // returns the exit code
  std::string usage;
};

std::map<std::string, CommandEntry>& commandRegistry();

struct CommandRegistrar {
  CommandRegistrar(const std::string& name, const std::string& usage, std::function<int(Args&)> run) {
    commandRegistry()[name] = CommandEntry{std::move(run), usage};
  }
};

}  // namespace kvscope::cli
