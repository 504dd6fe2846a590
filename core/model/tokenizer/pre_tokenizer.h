#pragma once
// Pre-tokenizers from tokenizer.json ("pre_tokenizer"): they cut normalized
// text into the pieces ("words") that the BPE model encodes one by one, and
// may rewrite them (ByteLevel maps bytes to characters, Metaspace turns
// spaces into "▁").
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

struct PreToken {
  std::string text;
  // Starts at offset 0 of the original input (Metaspace's "first" scheme
  // adds its prefix only there).
  bool at_text_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // The pieces one piece becomes, in order; empty pieces are dropped.
  virtual std::vector<PreToken> split(const PreToken& piece) const = 0;
};

// Runs a pre-tokenizer (null: none) over every piece.
std::vector<PreToken> preTokenize(const PreTokenizer* pre_tokenizer,
                                  std::vector<PreToken> pieces);

// Builds the pre-tokenizer described by node; nullptr for JSON null.
// Supported: ByteLevel, Split, Metaspace, Digits, Whitespace,
// WhitespaceSplit, Sequence. Throws Error(context: unsupported ...).
std::unique_ptr<PreTokenizer> makePreTokenizer(const nlohmann::json& node,
                                               const std::string& context);

// GPT-2's split regex, used by ByteLevel when use_regex is true.
extern const char* const kGpt2SplitRegex;

}  // namespace kvscope
