#include "core/model/tokenizer/normalizer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/tokenizer/text_pattern.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

class UnicodeNormalizer : public TextNormalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  std::string normalize(const std::string& text) const override {
    return normalizeUnicode(text, form_);
  }

 private:
  NormalForm form_;
};

class LowercaseNormalizer : public TextNormalizer {
 public:
  std::string normalize(const std::string& text) const override { return toLowerUnicode(text); }
};

// HF prepends only to non-empty text, so an empty piece stays empty.
class PrependNormalizer : public TextNormalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(const std::string& text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public TextNormalizer {
 public:
  ReplaceNormalizer(TextPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(const std::string& text) const override {
    return pattern_.replaceAll(text, content_);
  }

 private:
  TextPattern pattern_;
  std::string content_;
};

class StripNormalizer : public TextNormalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(const std::string& text) const override;

 private:
  bool left_;
  bool right_;
};

std::string StripNormalizer::normalize(const std::string& text) const {
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
  std::string normalize(const std::string& text) const override {
    std::string out = text;
    for (const auto& step : steps_) out = step->normalize(out);
    return out;
  }

 private:
  std::vector<std::unique_ptr<TextNormalizer>> steps_;
};

std::unique_ptr<TextNormalizer> makeSequence(const nlohmann::json& node,
                                             const std::string& context) {
  std::vector<std::unique_ptr<TextNormalizer>> steps;
  for (const auto& child : node.at("normalizers")) {
    if (auto step = makeNormalizer(child, context)) steps.push_back(std::move(step));
  }
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

}  // namespace

std::unique_ptr<TextNormalizer> makeNormalizer(const nlohmann::json& node,
                                               const std::string& context) {
  if (node.is_null()) return nullptr;
  const std::string type = componentType(node, context, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(node.at("prepend").get<std::string>());
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(TextPattern::fromJson(node.at("pattern"), context),
                                               node.at("content").get<std::string>());
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(valueOr(node, "strip_left", true),
                                             valueOr(node, "strip_right", true));
  }
  if (type == "Sequence") return makeSequence(node, context);
  fail(context, "unsupported normalizer type '" + type + "'");
}

}  // namespace kvscope
