#include "core/model/tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/tokenizer/byte_level.h"
#include "core/model/tokenizer/text_pattern.h"
#include "core/model/tokenizer/text_split.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {

const char* const kGpt2SplitRegex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

std::vector<PreToken> piecesFromSpans(const PreToken& piece, const std::vector<Span>& spans) {
  std::vector<PreToken> out;
  out.reserve(spans.size());
  for (const Span& s : spans) {
    out.push_back({piece.text.substr(s.begin, s.end - s.begin),
                   piece.at_text_start && s.begin == 0});
  }
  return out;
}

// Splits around pattern matches (a regex, or a literal string).
class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(TextPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  std::vector<PreToken> split(const PreToken& piece) const override {
    const std::vector<Span> matches = pattern_.findAll(piece.text);
    return piecesFromSpans(piece, splitSpans(piece.text.size(), matches, behavior_, invert_));
  }

 private:
  TextPattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits on a per-code-point predicate (Digits, WhitespaceSplit).
class CharSplitPreTokenizer : public PreTokenizer {
 public:
  CharSplitPreTokenizer(bool (*predicate)(char32_t), SplitBehavior behavior)
      : predicate_(predicate), behavior_(behavior) {}
  std::vector<PreToken> split(const PreToken& piece) const override {
    const std::vector<Span> matches = matchCodePoints(piece.text, predicate_);
    return piecesFromSpans(piece, splitSpans(piece.text.size(), matches, behavior_));
  }

 private:
  bool (*predicate_)(char32_t);
  SplitBehavior behavior_;
};

// GPT-2 style: optional leading space, optional regex split, then every
// byte becomes its printable stand-in character.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const std::string& context)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      regex_ = std::make_unique<TextPattern>(TextPattern::regex(kGpt2SplitRegex, context));
    }
  }
  std::vector<PreToken> split(const PreToken& piece) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<TextPattern> regex_;
};

std::vector<PreToken> ByteLevelPreTokenizer::split(const PreToken& piece) const {
  PreToken prefixed = piece;
  if (add_prefix_space_ && !piece.text.empty() && piece.text[0] != ' ') {
    prefixed.text = " " + piece.text;
  }
  std::vector<PreToken> pieces{prefixed};
  if (regex_) {
    const std::vector<Span> matches = regex_->findAll(prefixed.text);
    pieces = piecesFromSpans(
        prefixed, splitSpans(prefixed.text.size(), matches, SplitBehavior::Isolated));
  }
  for (PreToken& p : pieces) p.text = bytesToByteLevel(p.text);
  return pieces;
}

enum class PrependScheme { Always, First, Never };

// SentencePiece style: spaces become the replacement ("▁"), a "▁" is
// prepended per the scheme, and with split each "▁" starts a new piece.
class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  std::vector<PreToken> split(const PreToken& piece) const override;

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

std::vector<PreToken> MetaspacePreTokenizer::split(const PreToken& piece) const {
  PreToken out = piece;
  out.text = TextPattern::literal(" ").replaceAll(piece.text, replacement_);
  const bool starts_with_replacement = out.text.rfind(replacement_, 0) == 0;
  const bool prepend = scheme_ == PrependScheme::Always ||
                       (scheme_ == PrependScheme::First && piece.at_text_start);
  if (prepend && !starts_with_replacement && !out.text.empty()) out.text = replacement_ + out.text;
  if (!split_) return {out};
  const std::vector<Span> matches = TextPattern::literal(replacement_).findAll(out.text);
  return piecesFromSpans(out, splitSpans(out.text.size(), matches, SplitBehavior::MergedWithNext));
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  std::vector<PreToken> split(const PreToken& piece) const override {
    std::vector<PreToken> pieces{piece};
    for (const auto& step : steps_) pieces = preTokenize(step.get(), std::move(pieces));
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

PrependScheme parsePrependScheme(const nlohmann::json& node, const std::string& context) {
  if (!node.contains("prepend_scheme")) {
    // Older files say add_prefix_space instead.
    return valueOr(node, "add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
  }
  const std::string scheme = node.at("prepend_scheme").get<std::string>();
  if (scheme == "always") return PrependScheme::Always;
  if (scheme == "first") return PrependScheme::First;
  if (scheme == "never") return PrependScheme::Never;
  fail(context, "unknown Metaspace prepend_scheme '" + scheme + "'");
}

std::unique_ptr<PreTokenizer> makeMetaspace(const nlohmann::json& node,
                                            const std::string& context) {
  return std::make_unique<MetaspacePreTokenizer>(
      valueOr<std::string>(node, "replacement", "\u2581"), parsePrependScheme(node, context),
      valueOr(node, "split", true));
}

std::unique_ptr<PreTokenizer> makeSplit(const nlohmann::json& node, const std::string& context) {
  return std::make_unique<SplitPreTokenizer>(
      TextPattern::fromJson(node.at("pattern"), context),
      parseSplitBehavior(node.at("behavior").get<std::string>(), context),
      valueOr(node, "invert", false));
}

std::unique_ptr<PreTokenizer> makeSequence(const nlohmann::json& node,
                                           const std::string& context) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const auto& child : node.at("pretokenizers")) {
    if (auto step = makePreTokenizer(child, context)) steps.push_back(std::move(step));
  }
  return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

bool isDigit(char32_t c) { return isNumeric(c); }
bool isSpace(char32_t c) { return isWhitespace(c); }

}  // namespace

std::vector<PreToken> preTokenize(const PreTokenizer* pre_tokenizer,
                                  std::vector<PreToken> pieces) {
  if (!pre_tokenizer) return pieces;
  std::vector<PreToken> out;
  for (const PreToken& piece : pieces) {
    for (PreToken& p : pre_tokenizer->split(piece)) {
      if (!p.text.empty()) out.push_back(std::move(p));
    }
  }
  return out;
}

std::unique_ptr<PreTokenizer> makePreTokenizer(const nlohmann::json& node,
                                               const std::string& context) {
  if (node.is_null()) return nullptr;
  const std::string type = componentType(node, context, "pre-tokenizer");
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(valueOr(node, "add_prefix_space", true),
                                                   valueOr(node, "use_regex", true), context);
  }
  if (type == "Split") return makeSplit(node, context);
  if (type == "Metaspace") return makeMetaspace(node, context);
  if (type == "Sequence") return makeSequence(node, context);
  if (type == "Digits") {
    const bool individual = valueOr(node, "individual_digits", false);
    return std::make_unique<CharSplitPreTokenizer>(
        isDigit, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(isSpace, SplitBehavior::Removed);
  }
  if (type == "Whitespace") {
    // HF keeps the regex's matches and drops what lies between them.
    return std::make_unique<SplitPreTokenizer>(TextPattern::regex("\\w+|[^\\w\\s]+", context),
                                               SplitBehavior::Removed, true);
  }
  fail(context, "unsupported pre-tokenizer type '" + type + "'");
}

}  // namespace kvscope
