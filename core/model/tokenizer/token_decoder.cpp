#include "core/model/tokenizer/token_decoder.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/tokenizer/byte_level.h"
#include "core/model/tokenizer/text_pattern.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

// As for normalizers (normalizer.h): a decode chain may make at most
// 16 x + 4096 bytes per token of what it was given, so a chain of Replace
// steps with an empty regex cannot grow tokens exponentially.
size_t maxDecodedBytes(size_t input_bytes, size_t tokens) { return 16 * input_bytes + 4096 * std::max<size_t>(tokens, 1); }

size_t totalBytes(const std::vector<std::string>& tokens) {
  size_t total = 0;
  for (const std::string& token : tokens) total += token.size();
  return total;
}

[[noreturn]] void tooLong(const std::string& context, const char* step, size_t max_bytes) {
  fail(context, std::string("decoder ") + step + " would make more than " + std::to_string(max_bytes) +
                    " bytes of text, the limit for decoding these tokens (16 x their size + 4096 per token)");
}

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
  ReplaceDecoder(TextPattern pattern, std::string content, std::string context)
      : pattern_(std::move(pattern)), content_(std::move(content)), context_(std::move(context)) {}
  std::string tokenText(const std::string& token) const override {
    std::string out;
    const size_t max_bytes = maxDecodedBytes(token.size(), 1);
    if (!pattern_.replaceAllWithin(token, content_, max_bytes, out)) tooLong(context_, "Replace", max_bytes);
    return out;
  }

 private:
  TextPattern pattern_;
  std::string content_;
  std::string context_;
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
  SequenceDecoder(std::vector<std::unique_ptr<TokenDecoder>> steps, std::string context)
      : steps_(std::move(steps)), context_(std::move(context)) {}
  // One budget for the whole chain, from what the chain was given.
  std::vector<std::string> decodeChain(std::vector<std::string> tokens) const override {
    const size_t max_bytes = maxDecodedBytes(totalBytes(tokens), tokens.size());
    for (const auto& step : steps_) {
      tokens = step->decodeChain(std::move(tokens));
      if (totalBytes(tokens) > max_bytes) tooLong(context_, "Sequence", max_bytes);
    }
    return tokens;
  }
  std::string tokenText(const std::string& token) const override {
    const size_t max_bytes = maxDecodedBytes(token.size(), 1);
    std::string text = token;
    for (const auto& step : steps_) {
      text = step->tokenText(text);
      if (text.size() > max_bytes) tooLong(context_, "Sequence", max_bytes);
    }
    return text;
  }

 private:
  std::vector<std::unique_ptr<TokenDecoder>> steps_;
  std::string context_;
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
  return std::make_unique<SequenceDecoder>(std::move(steps), context);
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
                                            jsonString(node.at("content"), context, "decoder Replace content"),
                                            context);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    // Counts of characters to strip; no token is longer than this.
    constexpr int64_t kMaxStrip = int64_t{1} << 20;
    return std::make_unique<StripDecoder>(
        jsonString(node.at("content"), context, "decoder Strip content"),
        static_cast<size_t>(jsonInteger(node.at("start"), context, "decoder Strip start", 0, kMaxStrip)),
        static_cast<size_t>(jsonInteger(node.at("stop"), context, "decoder Strip stop", 0, kMaxStrip)));
  }
  if (type == "Metaspace") return makeMetaspace(node);
  if (type == "Sequence") return makeSequence(node, context);
  fail(context, "unsupported decoder type '" + type + "'");
}

}  // namespace kvscope
