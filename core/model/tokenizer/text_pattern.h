#pragma once
// A pattern from tokenizer.json ({"String": ...} or {"Regex": ...}) that
// finds spans in UTF-8 text. Regexes run on ICU; Hugging Face uses
// Oniguruma, so "\s"/"\S" are rewritten to Unicode White_Space (which is
// what Oniguruma means by them; ICU's own \s misses U+000B and U+0085).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

// A byte range [begin, end) in a UTF-8 string.
struct Span {
  size_t begin;
  size_t end;
};

class TextPattern {
 public:
  static TextPattern literal(const std::string& text);
  // Throws Error(context: ...) if ICU rejects the pattern.
  static TextPattern regex(const std::string& pattern, const std::string& context);
  // {"String": s} or {"Regex": r}.
  static TextPattern fromJson(const nlohmann::json& node, const std::string& context);

  // Non-overlapping matches, left to right, as byte offsets into text.
  std::vector<Span> findAll(const std::string& text) const;
  std::string replaceAll(const std::string& text, const std::string& content) const;
  // The same, but gives up (returns false) as soon as the result would pass
  // max_bytes: an empty regex matches everywhere, so chained replacements
  // grow text exponentially.
  bool replaceAllWithin(const std::string& text, const std::string& content, size_t max_bytes,
                        std::string& out) const;

 private:
  struct Regex;
  std::string literal_;
  std::shared_ptr<const Regex> regex_;  // null for a literal pattern
};

// Rewrites Oniguruma escapes that ICU reads differently (see above).
std::string toIcuRegexSyntax(const std::string& pattern);

}  // namespace kvscope
