#pragma once
// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): the
// vocabulary, the merges, and how one pre-tokenized word becomes ids
// (characters -> symbols, byte fallback "<0xNN>" or the unk token for
// characters outside the vocabulary, then merges).
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model/tokenizer/bpe_merges.h"

namespace kvscope {

class BpeModel {
 public:
  // Throws Error(context: ...) for a model that is not BPE or is broken
  // (merges naming tokens outside the vocabulary, bad merge strings, ...).
  static std::unique_ptr<BpeModel> fromJson(const nlohmann::json& model,
                                            const std::string& context);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void encodeWord(const std::string& word, std::vector<int64_t>& out) const;

  std::optional<int64_t> tokenToId(const std::string& token) const;
  // The vocabulary string of id, or null when the model has no such id.
  const std::string* idToToken(int64_t id) const;
  // Largest id + 1.
  int64_t idLimit() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  BpeModel() = default;
  void readVocab(const nlohmann::json& vocab, const std::string& context);
  void readMerges(const nlohmann::json& merges, const std::string& context);
  void addMerge(const std::string& left, const std::string& right, int rank,
                const std::string& context);
  std::vector<int64_t> initialSymbols(const std::string& word) const;
  bool appendByteFallback(const std::string& piece, std::vector<int64_t>& symbols) const;
  std::vector<int64_t> encodeUncached(const std::string& word) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> tokens_;  // by id; gaps are empty strings
  std::vector<bool> has_token_;
  MergeTable merges_;
  std::optional<int64_t> unk_id_;
  std::optional<std::string> continuing_subword_prefix_;
  std::optional<std::string> end_of_word_suffix_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  // Words repeat a lot in running text; remember their ids.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace kvscope
