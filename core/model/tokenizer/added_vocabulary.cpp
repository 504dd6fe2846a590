#include "core/model/tokenizer/added_vocabulary.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

// The code point that ends just before byte offset end.
char32_t codePointBefore(const std::string& text, size_t end) {
  size_t begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return utf8Step(text, begin).code_point;
}

bool isWordChar(char32_t c) { return c == '_' || isAlphanumeric(c); }

size_t skipWhitespaceLeft(const std::string& text, size_t pos, size_t limit) {
  while (pos > limit) {
    size_t begin = pos - 1;
    while (begin > limit && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    if (!isWhitespace(utf8Step(text, begin).code_point)) break;
    pos = begin;
  }
  return pos;
}

size_t skipWhitespaceRight(const std::string& text, size_t pos) {
  while (pos < text.size()) {
    const Utf8Step step = utf8Step(text, pos);
    if (!isWhitespace(step.code_point)) break;
    pos += step.length;
  }
  return pos;
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    index_by_id_[tokens_[i].id] = i;
    index_by_content_[tokens_[i].content] = i;
    if (tokens_[i].content.empty()) continue;  // HF never matches empty tokens
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [this](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

AddedVocabulary AddedVocabulary::fromJson(const nlohmann::json& list, const std::string& context) {
  if (list.is_null()) return {};
  if (!list.is_array()) fail(context, "\"added_tokens\" must be a list");
  std::vector<AddedToken> tokens;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& node = list[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!node.is_object()) fail(context, where + " must be an object, got " + jsonSnippet(node));
    AddedToken t;
    // The upper bound is checked against the model's ids by HfTokenizer.
    t.id = jsonInteger(node.at("id"), context, where + ".id", 0);
    t.content = jsonString(node.at("content"), context, where + ".content");
    t.single_word = valueOr(node, "single_word", false);
    t.lstrip = valueOr(node, "lstrip", false);
    t.rstrip = valueOr(node, "rstrip", false);
    t.normalized = valueOr(node, "normalized", true);
    t.special = valueOr(node, "special", false);
    tokens.push_back(std::move(t));
  }
  return AddedVocabulary(std::move(tokens));
}

bool AddedVocabulary::matchesAt(const std::string& text, size_t pos,
                                const AddedToken& token) const {
  if (text.compare(pos, token.content.size(), token.content) != 0) return false;
  if (!token.single_word) return true;
  const size_t end = pos + token.content.size();
  const bool word_before = pos > 0 && isWordChar(codePointBefore(text, pos));
  const bool word_after = end < text.size() && isWordChar(utf8Step(text, end).code_point);
  return !word_before && !word_after;
}

AddedVocabulary::Match AddedVocabulary::widen(const std::string& text, size_t from, size_t pos,
                                              const AddedToken& token) const {
  Match m{pos, pos + token.content.size(), token.id};
  if (token.lstrip) m.begin = skipWhitespaceLeft(text, m.begin, from);
  if (token.rstrip) m.end = skipWhitespaceRight(text, m.end);
  return m;
}

std::optional<AddedVocabulary::Match> AddedVocabulary::findNext(const std::string& text,
                                                                size_t from,
                                                                bool normalized) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    for (const size_t i : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const AddedToken& token = tokens_[i];
      if (token.normalized == normalized && matchesAt(text, pos, token)) {
        return widen(text, from, pos, token);
      }
    }
  }
  return std::nullopt;
}

std::vector<TextRun> AddedVocabulary::split(const TextRun& run, bool normalized) const {
  if (run.token_id || tokens_.empty()) return {run};
  std::vector<TextRun> out;
  size_t from = 0;
  auto addText = [&](size_t begin, size_t end) {
    if (end > begin) {
      out.push_back({run.text.substr(begin, end - begin), std::nullopt,
                     run.at_text_start && begin == 0});
    }
  };
  while (const std::optional<Match> m = findNext(run.text, from, normalized)) {
    addText(from, m->begin);
    out.push_back({run.text.substr(m->begin, m->end - m->begin), m->id, false});
    from = m->end;
  }
  addText(from, run.text.size());
  return out;
}

const AddedToken* AddedVocabulary::byId(int64_t id) const {
  const auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::byContent(const std::string& content) const {
  const auto it = index_by_content_.find(content);
  return it == index_by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace kvscope
