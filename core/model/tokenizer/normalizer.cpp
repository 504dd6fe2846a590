#include "core/model/tokenizer/normalizer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/tokenizer/text_pattern.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {

size_t maxNormalizedBytes(size_t input_bytes) { return 16 * input_bytes + 4096; }

namespace {

[[noreturn]] void tooLong(const std::string& context, const char* step, size_t max_bytes) {
  fail(context, std::string("normalizer ") + step + " would make more than " + std::to_string(max_bytes) +
                    " bytes of text, the limit for normalizing this input (16 x its size + 4096)");
}

// For the steps whose growth is bounded by construction (Unicode forms).
std::string checked(std::string out, size_t max_bytes, const std::string& context, const char* step) {
  if (out.size() > max_bytes) tooLong(context, step, max_bytes);
  return out;
}

class UnicodeNormalizer : public TextNormalizer {
 public:
  UnicodeNormalizer(NormalForm form, std::string context) : form_(form), context_(std::move(context)) {}
  std::string normalizeWithin(const std::string& text, size_t max_bytes) const override {
    return checked(normalizeUnicode(text, form_), max_bytes, context_, "NFC/NFD/NFKC/NFKD");
  }

 private:
  NormalForm form_;
  std::string context_;
};

class LowercaseNormalizer : public TextNormalizer {
 public:
  explicit LowercaseNormalizer(std::string context) : context_(std::move(context)) {}
  std::string normalizeWithin(const std::string& text, size_t max_bytes) const override {
    return checked(toLowerUnicode(text), max_bytes, context_, "Lowercase");
  }

 private:
  std::string context_;
};

// HF prepends only to non-empty text, so an empty piece stays empty.
class PrependNormalizer : public TextNormalizer {
 public:
  PrependNormalizer(std::string prefix, std::string context)
      : prefix_(std::move(prefix)), context_(std::move(context)) {}
  std::string normalizeWithin(const std::string& text, size_t max_bytes) const override {
    if (text.empty()) return text;
    if (prefix_.size() + text.size() > max_bytes) tooLong(context_, "Prepend", max_bytes);
    return prefix_ + text;
  }

 private:
  std::string prefix_;
  std::string context_;
};

class ReplaceNormalizer : public TextNormalizer {
 public:
  ReplaceNormalizer(TextPattern pattern, std::string content, std::string context)
      : pattern_(std::move(pattern)), content_(std::move(content)), context_(std::move(context)) {}
  std::string normalizeWithin(const std::string& text, size_t max_bytes) const override {
    std::string out;
    if (!pattern_.replaceAllWithin(text, content_, max_bytes, out)) tooLong(context_, "Replace", max_bytes);
    return out;
  }

 private:
  TextPattern pattern_;
  std::string content_;
  std::string context_;
};

class StripNormalizer : public TextNormalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalizeWithin(const std::string& text, size_t /*max_bytes: never grows*/) const override;

 private:
  bool left_;
  bool right_;
};

std::string StripNormalizer::normalizeWithin(const std::string& text, size_t) const {
  // Find the first and one-past-last non-whitespace code points.
  size_t first = text.size(), last = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8Step(text, pos);
    if (!isWhitespace(step.code_point)) {
      if (first == text.size()) first = pos;
      last = pos + step.length;
    }
    pos += step.length;
  }
  if (first == text.size()) return (left_ || right_) ? std::string() : text;
  const size_t begin = left_ ? first : 0;
  const size_t end = right_ ? last : text.size();
  return text.substr(begin, end - begin);
}

class SequenceNormalizer : public TextNormalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<TextNormalizer>> steps)
      : steps_(std::move(steps)) {}
  // One budget for the whole chain, from the text the chain was given.
  std::string normalizeWithin(const std::string& text, size_t max_bytes) const override {
    std::string out = text;
    for (const auto& step : steps_) out = step->normalizeWithin(out, max_bytes);
    return out;
  }

 private:
  std::vector<std::unique_ptr<TextNormalizer>> steps_;
};

std::unique_ptr<TextNormalizer> makeSequence(const nlohmann::json& node,
                                             const std::string& context) {
  std::vector<std::unique_ptr<TextNormalizer>> steps;
  const nlohmann::json& children = node.at("normalizers");
  if (!children.is_array()) fail(context, "normalizer Sequence: normalizers must be a list, got " + jsonSnippet(children));
  for (const auto& child : children) {
    if (auto step = makeNormalizer(child, context)) steps.push_back(std::move(step));
  }
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

}  // namespace

std::unique_ptr<TextNormalizer> makeNormalizer(const nlohmann::json& node,
                                               const std::string& context) {
  if (node.is_null()) return nullptr;
  const std::string type = componentType(node, context, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC, context);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD, context);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC, context);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD, context);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>(context);
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(jsonString(node.at("prepend"), context, "normalizer Prepend prepend"),
                                               context);
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(TextPattern::fromJson(node.at("pattern"), context),
                                               jsonString(node.at("content"), context, "normalizer Replace content"),
                                               context);
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(valueOr(node, "strip_left", true),
                                             valueOr(node, "strip_right", true));
  }
  if (type == "Sequence") return makeSequence(node, context);
  fail(context, "unsupported normalizer type '" + type + "'");
}

}  // namespace kvscope
