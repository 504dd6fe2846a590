#pragma once
// Command-line options of one kvscope-cli subcommand: `--name value` pairs,
// boolean `--flag`s and positional arguments. Every option must be consumed
// by the command; leftovers are reported as unknown.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvscope::cli {

class Args {
 public:
  // flags: the option names that take no value (without "--").
  Args(const std::vector<std::string>& argv, const std::set<std::string>& flags);

  bool flag(const std::string& name);
  // The option's value; throws Error when a repeatable option was given more than once.
  std::optional<std::string> value(const std::string& name);
  // Every value of a repeatable option (--prompt, --prompt-ids), in order.
  std::vector<std::string> values(const std::string& name);
  std::string required(const std::string& name);
  int64_t integer(const std::string& name, int64_t fallback);
  double number(const std::string& name, double fallback);
  // "1,2,3" -> {1, 2, 3}: token ids, or items named `noun` in errors ("row", "channel").
  std::optional<std::vector<int64_t>> idList(const std::string& name);
  std::optional<std::vector<int64_t>> idList(const std::string& name, const std::string& noun);
  const std::vector<std::string>& positional() const { return positional_; }

  // Throws Error naming any option the command did not read.
  void finish() const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_set_;
  std::set<std::string> consumed_;
  std::vector<std::string> positional_;
};

std::vector<int64_t> parseIdList(const std::string& text, const std::string& option,
                                 const std::string& noun = "token id");

}  // namespace kvscope::cli
