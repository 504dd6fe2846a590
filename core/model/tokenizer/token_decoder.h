#pragma once
// Decoders from tokenizer.json ("decoder"): how token strings become text.
// ByteLevel maps GPT-2's byte characters back to bytes; the Llama-2 legacy
// chain is Replace("▁", " "), ByteFallback ("<0x0A>" -> byte), Fuse, and
// Strip(" ", 1, 0), which drops the space the normalizer prepended.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  // One step of HF's decode chain: token strings in, token strings out.
  virtual std::vector<std::string> decodeChain(std::vector<std::string> tokens) const = 0;
  // How one token reads inside running text: no start-of-text stripping,
  // and byte tokens give their raw byte (possibly partial UTF-8).
  virtual std::string tokenText(const std::string& token) const = 0;
};

// Runs the decoder and concatenates; without a decoder, HF joins with " ".
std::string decodeTokens(const TokenDecoder* decoder, std::vector<std::string> tokens);

// nullptr for JSON null. Supported: ByteLevel, Replace, ByteFallback, Fuse,
// Strip, Metaspace, Sequence.
std::unique_ptr<TokenDecoder> makeTokenDecoder(const nlohmann::json& node,
                                               const std::string& context);

}  // namespace kvscope
