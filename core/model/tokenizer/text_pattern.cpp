#include "core/model/tokenizer/text_pattern.h"

#include <chrono>

#include <nlohmann/json.hpp>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {

struct TextPattern::Regex {
  std::unique_ptr<icu::RegexPattern> pattern;  // shared read-only; matchers are per call
  std::string source;                          // as the file wrote it, for errors
  std::string context;                         // the file it came from
};

namespace {

// A regex from a file can backtrack catastrophically ("(a+)+$" on 33 a's and
// a b runs for minutes). Each search gets a wall-clock budget that grows
// with the text, far above what any real pre-tokenizer regex needs (tens of
// MB/s), and a bound on ICU's backtracking stack (heap memory).
constexpr double kRegexBaseSeconds = 0.25;
constexpr double kRegexSecondsPerByte = 2e-7;  // 1 s per 5 MB
constexpr int32_t kRegexStackBytes = 16 << 20;

using Clock = std::chrono::steady_clock;

// ICU calls this every few thousand matching steps; false stops the match
// with U_REGEX_STOPPED_BY_CALLER.
UBool U_CALLCONV withinDeadline(const void* deadline, int32_t /*steps*/) {
  return Clock::now() < *static_cast<const Clock::time_point*>(deadline);
}

// UTF-16 copy of a UTF-8 string plus, for every UTF-16 index, the matching
// byte offset, so ICU's match positions map back exactly. Invalid bytes
// become U+FFFD here, one per invalid subpart, consistent with the table.
struct Utf16Text {
  icu::UnicodeString text;
  std::vector<size_t> utf8_offset;  // size text.length() + 1
};

Utf16Text toUtf16(const std::string& utf8) {
  Utf16Text out;
  out.utf8_offset.reserve(utf8.size() + 1);
  for (size_t pos = 0; pos < utf8.size();) {
    const Utf8Step step = utf8Step(utf8, pos);
    out.text.append(static_cast<UChar32>(step.code_point));
    const int units = step.code_point >= 0x10000 ? 2 : 1;
    for (int i = 0; i < units; ++i) out.utf8_offset.push_back(pos);
    pos += step.length;
  }
  out.utf8_offset.push_back(utf8.size());
  return out;
}

std::vector<Span> findLiteral(const std::string& text, const std::string& needle) {
  std::vector<Span> spans;
  if (needle.empty()) return spans;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    spans.push_back({pos, pos + needle.size()});
  }
  return spans;
}

}  // namespace

std::string toIcuRegexSyntax(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char next = pattern[++i];
    if (next == 's') {
      out += "\\p{White_Space}";
    } else if (next == 'S') {
      out += "\\P{White_Space}";
    } else {
      out += '\\';
      out += next;
    }
  }
  return out;
}

TextPattern TextPattern::literal(const std::string& text) {
  TextPattern p;
  p.literal_ = text;
  return p;
}

TextPattern TextPattern::regex(const std::string& pattern, const std::string& context) {
  UParseError parse_error{};
  UErrorCode status = U_ZERO_ERROR;
  auto regex = std::make_shared<Regex>();
  regex->pattern.reset(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(toIcuRegexSyntax(pattern)), 0, parse_error, status));
  if (U_FAILURE(status) || !regex->pattern) {
    fail(context, "cannot compile regex '" + pattern + "' (" + u_errorName(status) +
                      " at offset " + std::to_string(parse_error.offset) + ")");
  }
  regex->source = pattern;
  regex->context = context;
  TextPattern p;
  p.regex_ = std::move(regex);
  return p;
}

TextPattern TextPattern::fromJson(const nlohmann::json& node, const std::string& context) {
  if (node.is_object() && node.contains("String")) {
    return literal(jsonString(node.at("String"), context, "pattern String"));
  }
  if (node.is_object() && node.contains("Regex")) {
    return regex(jsonString(node.at("Regex"), context, "pattern Regex"), context);
  }
  fail(context, "pattern must be {\"String\": ...} or {\"Regex\": ...}, got " + jsonSnippet(node));
}

std::vector<Span> TextPattern::findAll(const std::string& text) const {
  if (!regex_) return findLiteral(text, literal_);
  const Utf16Text utf16 = toUtf16(text);
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(regex_->pattern->matcher(utf16.text, status));
  const double budget = kRegexBaseSeconds + kRegexSecondsPerByte * static_cast<double>(text.size());
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget));
  if (U_SUCCESS(status)) matcher->setMatchCallback(withinDeadline, &deadline, status);
  if (U_SUCCESS(status)) matcher->setStackLimit(kRegexStackBytes, status);
  std::vector<Span> spans;
  while (U_SUCCESS(status) && matcher->find(status)) {
    const int32_t begin = matcher->start(status);
    const int32_t end = matcher->end(status);
    if (U_FAILURE(status)) break;
    spans.push_back({utf16.utf8_offset[begin], utf16.utf8_offset[end]});
  }
  const std::string shown = regex_->source.size() <= 80 ? regex_->source : regex_->source.substr(0, 80) + "...";
  if (status == U_REGEX_STOPPED_BY_CALLER) {
    fail(regex_->context, "regex '" + shown + "' gave up on a " + std::to_string(text.size()) +
                              "-byte text after its time limit of " + std::to_string(budget) +
                              " s (catastrophic backtracking?)");
  }
  if (status == U_REGEX_STACK_OVERFLOW) {
    fail(regex_->context, "regex '" + shown + "' gave up on a " + std::to_string(text.size()) +
                              "-byte text: it needs more than " + std::to_string(kRegexStackBytes >> 20) +
                              " MB of backtracking memory");
  }
  if (U_FAILURE(status)) fail(regex_->context, "regex '" + shown + "' failed: " + u_errorName(status));
  return spans;
}

std::string TextPattern::replaceAll(const std::string& text, const std::string& content) const {
  std::string out;
  replaceAllWithin(text, content, std::string::npos, out);
  return out;
}

bool TextPattern::replaceAllWithin(const std::string& text, const std::string& content, size_t max_bytes,
                                   std::string& out) const {
  out.clear();
  size_t copied = 0;
  for (const Span& span : findAll(text)) {
    if (out.size() + (span.begin - copied) + content.size() > max_bytes) return false;
    out.append(text, copied, span.begin - copied);
    out += content;
    copied = span.end;
  }
  if (out.size() + (text.size() - copied) > max_bytes) return false;
  out.append(text, copied, std::string::npos);
  return true;
}

}  // namespace kvscope
