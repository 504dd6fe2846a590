#include "app/cli/args.h"

#include "core/error.h"

namespace kvscope::cli {

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
    if (flags.count(name)) {
      if (has_inline) throw Error("option --" + name + " takes no value");
      flags_set_.insert(name);
    } else if (has_inline) {
      values_[name] = inline_value;
    } else {
      if (i + 1 >= argv.size()) throw Error("option --" + name + " needs a value");
      values_[name] = argv[++i];
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
  return it->second;
}

std::string Args::required(const std::string& name) {
  auto v = value(name);
  if (!v) throw Error("missing required option --" + name);
  return *v;
}

int64_t Args::integer(const std::string& name, int64_t fallback) {
  auto v = value(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long parsed = std::stoll(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing characters");
    return parsed;
  } catch (const std::exception&) {
    throw Error("option --" + name + " expects an integer, got '" + *v + "'");
  }
}

double Args::number(const std::string& name, double fallback) {
  auto v = value(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double parsed = std::stod(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing characters");
    return parsed;
  } catch (const std::exception&) {
    throw Error("option --" + name + " expects a number, got '" + *v + "'");
  }
}

std::optional<std::vector<int64_t>> Args::idList(const std::string& name) {
  auto v = value(name);
  if (!v) return std::nullopt;
  return parseIdList(*v, name);
}

// Strict on purpose: "1,", "+1", " 1" or "1 2" are typos, and a typo in a
// token id list must not silently become a different prompt.
std::vector<int64_t> parseIdList(const std::string& text, const std::string& option) {
  const std::string example = " (expected e.g. 1,2,3: decimal ids separated by commas, no spaces or signs)";
  if (text.empty()) throw Error("option --" + option + " needs at least one id" + example);
  std::vector<int64_t> ids;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string item = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    const std::string which = "id #" + std::to_string(ids.size() + 1);
    if (item.empty()) throw Error("option --" + option + ": " + which + " is empty in '" + text + "'" + example);
    if (item.find_first_not_of("0123456789") != std::string::npos)
      throw Error("option --" + option + ": '" + item + "' is not a token id" + example);
    // 19 digits can still overflow int64; the ids of any vocabulary are far smaller.
    if (item.size() > 18) throw Error("option --" + option + ": '" + item + "' is too large for a token id");
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
