#include "app/cli/args.h"

#include <sstream>

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

std::vector<int64_t> parseIdList(const std::string& text, const std::string& option) {
  std::vector<int64_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw Error("option --" + option + ": '" + item + "' is not a token id (expected e.g. 1,2,3)");
    }
  }
  if (ids.empty()) throw Error("option --" + option + " needs at least one id");
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
