#pragma once
// The "added_tokens" of tokenizer.json (special tokens such as <s>, </s>,
// <|endoftext|>, and any user-added tokens). Their literal text is cut out
// of the input before the normalizer and pre-tokenizer run, so they always
// become their own id; the text on either side is tokenized separately.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool single_word = false;  // match only as a whole word
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool normalized = true;    // matched in normalized text (else in raw text)
  bool special = false;      // dropped by decode(skip_special_tokens)
};

// A stretch of input: plain text still to tokenize, or one added token.
struct TextRun {
  std::string text;
  std::optional<int64_t> token_id;
  bool at_text_start = false;  // begins at offset 0 of the whole input
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);
  static AddedVocabulary fromJson(const nlohmann::json& list, const std::string& context);

  // Cuts the added tokens whose `normalized` flag equals `normalized` out
  // of a plain run (leftmost match first, the longest one at a position).
  std::vector<TextRun> split(const TextRun& run, bool normalized) const;

  const AddedToken* byId(int64_t id) const;
  const AddedToken* byContent(const std::string& content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Match {
    size_t begin;  // including whitespace taken by lstrip
    size_t end;    // including whitespace taken by rstrip
    int64_t id;
  };
  std::optional<Match> findNext(const std::string& text, size_t from, bool normalized) const;
  bool matchesAt(const std::string& text, size_t pos, const AddedToken& token) const;
  Match widen(const std::string& text, size_t from, size_t pos, const AddedToken& token) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int64_t, size_t> index_by_id_;
  std::unordered_map<std::string, size_t> index_by_content_;
  // Candidates by first byte, longest content first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
};

}  // namespace kvscope
