#include "app/cli/args.h"

#include <cctype>
#include <cmath>

#include "core/error.h"

namespace kvscope::cli {
namespace {

// Options a command may take several times, one value each: the prompts of a
// batch. Every other option given twice is refused.
bool repeatable(const std::string& name) { return name == "prompt" || name == "prompt-ids"; }

}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), inline_value;
    const auto eq = name.find('=');
    const bool has_inline = eq != std::string::npos;
    if (has_inline) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    // A repeated option kept the last value in silence (--continuation-ids
    // twice ran with the second list): refused, as duplicate JSON keys are.
    if ((values_.count(name) && !repeatable(name)) || flags_set_.count(name))
      throw Error("option --" + name + " is given twice");
    if (flags.count(name)) {
      if (has_inline) throw Error("option --" + name + " takes no value");
      flags_set_.insert(name);
    } else if (has_inline) {
      values_[name].push_back(inline_value);
    } else {
      if (i + 1 >= argv.size()) throw Error("option --" + name + " needs a value");
      values_[name].push_back(argv[++i]);
    }
  }
}

bool Args::flag(const std::string& name) {
  consumed_.insert(name);
  return flags_set_.count(name) != 0;
}

std::optional<std::string> Args::value(const std::string& name) {
  consumed_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  if (it->second.size() > 1) {
    throw Error("option --" + name + " is given " + std::to_string(it->second.size()) + " times; this command takes one");
  }
  return it->second.front();
}

std::vector<std::string> Args::values(const std::string& name) {
  consumed_.insert(name);
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

std::string Args::required(const std::string& name) {
  auto v = value(name);
  if (!v) throw Error("missing required option --" + name);
  return *v;
}

int64_t Args::integer(const std::string& name, int64_t fallback) {
  auto v = value(name);
  if (!v) return fallback;
  // Decimal digits with an optional '-': stoll alone also takes " 5" and
  // "+5", and a typo must not become a different number.
  const std::string& text = *v;
  const size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
  const bool decimal = text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
  try {
    if (!decimal) throw std::invalid_argument("not a decimal integer");
    return std::stoll(text);
  } catch (const std::out_of_range&) {
    throw Error("option --" + name + ": '" + text + "' does not fit a 64-bit integer");
  } catch (const std::exception&) {
    throw Error("option --" + name + " expects an integer, got '" + text + "'");
  }
}

double Args::number(const std::string& name, double fallback) {
  auto v = value(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double parsed = std::stod(*v, &used);
    // stod also reads "nan", "inf" and " 0.5"; none is a setting anyone means.
    if (used != v->size() || !std::isfinite(parsed) || std::isspace(static_cast<unsigned char>((*v)[0]))) {
      throw std::invalid_argument("not a finite number");
    }
    return parsed;
  } catch (const std::exception&) {
    throw Error("option --" + name + " expects a finite number, got '" + *v + "'");
  }
}

std::optional<std::vector<int64_t>> Args::idList(const std::string& name) { return idList(name, "token id"); }

std::optional<std::vector<int64_t>> Args::idList(const std::string& name, const std::string& noun) {
  auto v = value(name);
  if (!v) return std::nullopt;
  return parseIdList(*v, name, noun);
}

// Strict on purpose: "1,", "+1", " 1" or "1 2" are typos, and a typo in a
// token id list must not silently become a different prompt.
std::vector<int64_t> parseIdList(const std::string& text, const std::string& option, const std::string& noun) {
  const std::string example = " (expected e.g. 1,2,3: decimal " + noun + "s separated by commas, no spaces or signs)";
  if (text.empty()) throw Error("option --" + option + " needs at least one id" + example);
  std::vector<int64_t> ids;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string item = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    const std::string which = noun + " #" + std::to_string(ids.size() + 1);
    if (item.empty()) throw Error("option --" + option + ": " + which + " is empty in '" + text + "'" + example);
    if (item.find_first_not_of("0123456789") != std::string::npos)
      throw Error("option --" + option + ": '" + item + "' is not a " + noun + example);
    // 19 digits can still overflow int64; the ids of any vocabulary are far smaller.
    if (item.size() > 18) throw Error("option --" + option + ": '" + item + "' is too large for a " + noun);
    ids.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return ids;
}

void Args::finish() const {
  for (const auto& entry : values_) {
    if (!consumed_.count(entry.first)) throw Error("unknown option --" + entry.first);
  }
  for (const auto& name : flags_set_) {
    if (!consumed_.count(name)) throw Error("unknown option --" + name);
  }
}

}  // namespace kvscope::cli
