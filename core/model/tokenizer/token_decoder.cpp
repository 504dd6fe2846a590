#include "core/model/tokenizer/token_decoder.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/tokenizer/byte_level.h"
#include "core/model/tokenizer/text_pattern.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

// A token whose string is the same in running text as in the chain.
class PerTokenDecoder : public TokenDecoder {
 public:
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) token = tokenText(token);
    return tokens;
  }
};

// HF keeps a token's own bytes when one of its characters is not a byte
// character (e.g. an added token), then repairs invalid UTF-8 with U+FFFD.
class ByteLevelDecoder : public TokenDecoder {
 public:
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) bytes += tokenText(token);
    return {utf8Lossy(bytes)};
  }
  std::string tokenText(const std::string& token) const override {
    return byteLevelToBytes(token).value_or(token);
  }
};

class ReplaceDecoder : public PerTokenDecoder {
 public:
  ReplaceDecoder(TextPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string tokenText(const std::string& token) const override {
    return pattern_.replaceAll(token, content_);
  }

 private:
  TextPattern pattern_;
  std::string content_;
};

// "<0xNN>" (exactly six characters, as HF checks) -> the byte.
std::optional<char> byteTokenValue(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
  const std::string hex = token.substr(3, 2);
  if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return std::nullopt;
  return static_cast<char>(std::stoi(hex, nullptr, 16));
}

// Runs of byte tokens become their text when valid UTF-8, else one U+FFFD
// per byte (HF's rule).
class ByteFallbackDecoder : public TokenDecoder {
 public:
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override;
  std::string tokenText(const std::string& token) const override {
    const std::optional<char> byte = byteTokenValue(token);
    return byte ? std::string(1, *byte) : token;
  }
};

void flushBytes(std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  if (isValidUtf8(bytes)) {
    out.push_back(bytes);
  } else {
    for (size_t i = 0; i < bytes.size(); ++i) out.push_back("\xEF\xBF\xBD");
  }
  bytes.clear();
}

std::vector<std::string> ByteFallbackDecoder::decodeChain(std::vector<std::string> tokens) const {
  std::vector<std::string> out;
  std::string bytes;
  for (std::string& token : tokens) {
    if (const std::optional<char> byte = byteTokenValue(token)) {
      bytes += *byte;
      continue;
    }
    flushBytes(bytes, out);
    out.push_back(std::move(token));
  }
  flushBytes(bytes, out);
  return out;
}

class FuseDecoder : public TokenDecoder {
 public:
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override {
    std::string fused;
    for (const std::string& token : tokens) fused += token;
    return {fused};
  }
  std::string tokenText(const std::string& token) const override { return token; }
};

// Removes up to `start` leading and `stop` trailing copies of one character
// from each token. In the Llama chain it runs after Fuse, so it strips the
// start of the whole text; per token (tokenText) it does nothing.
class StripDecoder : public TokenDecoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override;
  std::string tokenText(const std::string& token) const override { return token; }

 private:
  std::string content_;
  size_t start_;
  size_t stop_;
};

std::vector<std::string> StripDecoder::decodeChain(std::vector<std::string> tokens) const {
  if (content_.empty()) return tokens;
  const size_t n = content_.size();
  for (std::string& token : tokens) {
    size_t begin = 0, end = token.size();
    for (size_t i = 0; i < start_ && token.compare(begin, n, content_) == 0; ++i) begin += n;
    for (size_t i = 0; i < stop_ && end >= begin + n && token.compare(end - n, n, content_) == 0;
         ++i) {
      end -= n;
    }
    token = token.substr(begin, end - begin);
  }
  return tokens;
}

// "▁" -> " "; HF drops every "▁" of the first token unless the prepend
// scheme is "never" (that removes the prefix the pre-tokenizer added).
class MetaspaceDecoder : public TokenDecoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool drop = i == 0 && strip_first_;
      tokens[i] = TextPattern::literal(replacement_).replaceAll(tokens[i], drop ? "" : " ");
    }
    return tokens;
  }
  std::string tokenText(const std::string& token) const override {
    return TextPattern::literal(replacement_).replaceAll(token, " ");
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public TokenDecoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<TokenDecoder>> steps)
      : steps_(std::move(steps)) {}
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->decodeChain(std::move(tokens));
    return tokens;
  }
  std::string tokenText(const std::string& token) const override {
    std::string text = token;
    for (const auto& step : steps_) text = step->tokenText(text);
    return text;
  }

 private:
  std::vector<std::unique_ptr<TokenDecoder>> steps_;
};

std::unique_ptr<TokenDecoder> makeMetaspace(const nlohmann::json& node) {
  bool strip_first = valueOr(node, "add_prefix_space", true);
  if (node.contains("prepend_scheme")) strip_first = node.at("prepend_scheme") != "never";
  return std::make_unique<MetaspaceDecoder>(valueOr<std::string>(node, "replacement", "\u2581"),
                                            strip_first);
}

std::unique_ptr<TokenDecoder> makeSequence(const nlohmann::json& node,
                                           const std::string& context) {
  std::vector<std::unique_ptr<TokenDecoder>> steps;
  for (const auto& child : node.at("decoders")) {
    if (auto step = makeTokenDecoder(child, context)) steps.push_back(std::move(step));
  }
  return std::make_unique<SequenceDecoder>(std::move(steps));
}

}  // namespace

std::string decodeTokens(const TokenDecoder* decoder, std::vector<std::string> tokens) {
  std::string text;
  if (!decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  for (const std::string& piece : decoder->decodeChain(std::move(tokens))) text += piece;
  return text;
}

std::unique_ptr<TokenDecoder> makeTokenDecoder(const nlohmann::json& node,
                                               const std::string& context) {
  if (node.is_null()) return nullptr;
  const std::string type = componentType(node, context, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(TextPattern::fromJson(node.at("pattern"), context),
                                            node.at("content").get<std::string>());
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(node.at("content").get<std::string>(),
                                          node.at("start").get<size_t>(),
                                          node.at("stop").get<size_t>());
  }
  if (type == "Metaspace") return makeMetaspace(node);
  if (type == "Sequence") return makeSequence(node, context);
  fail(context, "unsupported decoder type '" + type + "'");
}

}  // namespace kvscope
