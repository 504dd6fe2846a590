#include "core/decode/session_eviction.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace kvscope {

namespace {

const char* kEvictForm = "--evict must be POLICY:BUDGET[:every=N] (e.g. h2o:0.25:every=4; budget a fraction in (0, 1] "
                         "or a row count; also :sinks=N :window=N :kernel=K :seed=S)";

[[noreturn]] void badEvict(const std::string& text, const std::string& why) {
  throw Error(std::string(kEvictForm) + ", got '" + text + "'" + (why.empty() ? "" : ": " + why));
}

std::vector<std::string> splitColons(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ':')) parts.push_back(part);
  if (!text.empty() && text.back() == ':') parts.push_back("");
  return parts;
}

// The whole of `text` as an integer (no sign games, no trailing junk).
bool parseInteger(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 18 || !std::all_of(text.begin(), text.end(), ::isdigit)) return false;
  *out = std::stoll(text);
  return true;
}

// "0.25" / "1.0" / ".5": a fraction; "48": a row count. "1" is one row.
void parseBudget(const std::string& text, const std::string& whole, EvictionBudget* budget) {
  int64_t rows = 0;
  if (parseInteger(text, &rows)) {
    if (rows < 1) badEvict(whole, "a row budget must be >= 1");
    budget->rows = rows;
    return;
  }
  char* end = nullptr;
  const double fraction = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(fraction > 0 && fraction <= 1)) {
    badEvict(whole, "the budget '" + text + "' is neither a fraction in (0, 1] nor a row count");
  }
  budget->fraction = fraction;
}

void parseParameter(const std::string& part, const std::string& whole, SessionEviction* out) {
  const size_t eq = part.find('=');
  if (eq == std::string::npos) badEvict(whole, "'" + part + "' is not NAME=VALUE");
  const std::string name = part.substr(0, eq), text = part.substr(eq + 1);
  int64_t value = 0;
  if (!parseInteger(text, &value)) badEvict(whole, name + " must be a non-negative integer");
  EvictionSettings& s = out->settings;
  if (name == "every") out->recompress_every = value;
  else if (name == "sinks") s.sinks = value;
  else if (name == "window") s.window = value;
  else if (name == "kernel") s.kernel = value;
  else if (name == "seed") s.seed = static_cast<uint64_t>(value);
  else badEvict(whole, "unknown parameter '" + name + "'");
}

}  // namespace

SessionEviction parseSessionEviction(const std::string& text) {
  const std::vector<std::string> parts = splitColons(text);
  if (parts.size() < 2) badEvict(text, "");
  SessionEviction out;
  try {
    out.settings.policy = parseEvictionPolicy(parts[0]);
  } catch (const Error& e) {
    badEvict(text, e.what());
  }
  parseBudget(parts[1], text, &out.settings.budget);
  for (size_t i = 2; i < parts.size(); ++i) parseParameter(parts[i], text, &out);
  out.validate();
  return out;
}

void SessionEviction::validate() const {
  require(recompress_every >= 0, "--evict: every=N must be >= 0 (0: after the prefill only), got " +
                                     std::to_string(recompress_every));
  require(settings.demote_bits == 0,
          "--evict: a session evicts rows; demoting them is the compression lab's (kvscope-cli compress --demote)");
  try {
    settings.validate();
  } catch (const Error& e) {
    throw Error(std::string("--evict: ") + e.what());
  }
}

std::string SessionEviction::describe() const {
  std::string text = std::string(evictionPolicyName(settings.policy)) + ":" +
                     (settings.budget.rows > 0 ? std::to_string(settings.budget.rows) : formatNumber(settings.budget.fraction));
  if (settings.budget.rows == 0 && settings.budget.fraction == 1.0) text += ".0";  // "1" would read as one row
  if (recompress_every > 0) text += ":every=" + std::to_string(recompress_every);
  return text;
}

}  // namespace kvscope
