#pragma once
// Shared helpers of the session_*_test.cpp files: fixture models loaded once
// per process, seeded prompts, and the per-round cache bookkeeping check.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/decode/autoregressive.h"
#include "core/decode/drafter.h"
#include "core/decode/session.h"
#include "core/model/bundled_models.h"
#include "core/model/causal_lm.h"
#include "core/model/scoring.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope::testing_support {

namespace fs = std::filesystem;

inline fs::path fixturesDir() { return fs::path(KVSCOPE_FIXTURES); }
inline std::string modelDir(const std::string& name) { return (fixturesDir() / "models" / name).string(); }

// Each fixture model is loaded once per test process and shared.
inline std::shared_ptr<const CausalLM> fixtureModel(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const CausalLM>> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  std::shared_ptr<const CausalLM> model = loadCausalLM(modelDir(name), torch::TensorOptions().dtype(torch::kFloat32));
  loaded[name] = model;
  return model;
}

// A second, independent instance (a different object with the same weights).
inline std::shared_ptr<const CausalLM> freshModel(const std::string& name) {
  return loadCausalLM(modelDir(name), torch::TensorOptions().dtype(torch::kFloat32));
}

// A bundled model (resources/models/ROLE) in float32, loaded once per process.
inline std::shared_ptr<const CausalLM> bundledModel(const std::string& role) {
  static std::map<std::string, std::shared_ptr<const CausalLM>> loaded;
  auto& model = loaded[role];
  if (!model) model = loadCausalLM(bundledModelDirectory(role), torch::TensorOptions().dtype(torch::kFloat32));
  return model;
}

inline std::shared_ptr<const Tokenizer> fixtureTokenizer(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Tokenizer>> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  std::shared_ptr<const Tokenizer> tokenizer = Tokenizer::fromDirectory(modelDir(name));
  loaded[name] = tokenizer;
  return tokenizer;
}

inline nlohmann::json readJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

// `count` prompts of random ids with lengths in [min_len, max_len] from a
// seeded generator (std::mt19937_64 is fully specified, so they are the same
// on every platform).
inline std::vector<std::vector<int64_t>> randomPrompts(int count, int64_t vocab, int64_t min_len, int64_t max_len,
                                                       uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> prompts;
  for (int i = 0; i < count; ++i) {
    const int64_t length = min_len + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_len - min_len + 1));
    std::vector<int64_t> prompt;
    for (int64_t j = 0; j < length; ++j) prompt.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
    prompts.push_back(prompt);
  }
  return prompts;
}

// The strings of a tokenizer fixture (tests/fixtures/tokenizers/<name>/encodings.json),
// encoded with our tokenizer of the model `model_name`, keeping those of
// at most max_len ids.
inline std::vector<std::vector<int64_t>> textPrompts(const std::string& encodings_name, const std::string& model_name,
                                                     size_t max_len) {
  const auto doc = readJson(fixturesDir() / "tokenizers" / encodings_name / "encodings.json");
  const auto tokenizer = fixtureTokenizer(model_name);
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& c : doc["cases"]) {
    auto ids = tokenizer->encode(c["text"].get<std::string>());
    if (!ids.empty() && ids.size() <= max_len) prompts.push_back(ids);
  }
  return prompts;
}

inline std::string idsToString(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

inline SamplingSettings greedySettings() { return SamplingSettings{}; }

inline SamplingSettings sampledSettings(double temperature, int64_t top_k = 0, double top_p = 1.0) {
  SamplingSettings s;
  s.greedy = false;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  return s;
}

inline SessionOptions fastOptions(int64_t gamma, int64_t max_new, bool use_cache, SamplingSettings sampling,
                                  uint64_t seed = 0) {
  SessionOptions o;
  o.gamma = gamma;
  o.max_new_tokens = max_new;
  o.use_cache = use_cache;
  o.sampling = sampling;
  o.seed = seed;
  o.record_attention = false;
  o.record_logits = false;
  return o;
}

// A divergence is only excused when the reference's own top-1/top-2 logit gap
// at that position is below this (float noise between a batched verify and
// one-token steps is ~1e-6; the fixtures' smallest real gap is 8.4e-4).
inline constexpr double kTieMargin = 1e-4;

inline double topTwoMargin(const CausalLM& model, const std::vector<int64_t>& ids) {
  c10::InferenceMode guard;
  const auto logits = model.forward(idsTensor(ids), 0, nullptr)[-1];
  const auto top = std::get<0>(logits.topk(2));
  return (top[0] - top[1]).item<double>();
}

// Compares a speculative output with the reference. Returns true when they
// are equal; false when they differ only after a float-noise tie (reported);
// records a failure otherwise.
inline bool expectSameTokens(const CausalLM& target, const std::vector<int64_t>& prompt, const std::vector<int64_t>& reference,
                      const std::vector<int64_t>& got, const std::string& label, int* ties) {
  if (got == reference) return true;
  size_t i = 0;
  while (i < got.size() && i < reference.size() && got[i] == reference[i]) ++i;
  if (i < got.size() && i < reference.size()) {
    std::vector<int64_t> prefix = prompt;
    prefix.insert(prefix.end(), reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(i));
    const double margin = topTwoMargin(target, prefix);
    if (margin < kTieMargin) {
      ++*ties;
      std::cout << "[ note ] " << label << ": float tie at generated index " << i << " (top-2 margin " << margin
                << ")\n";
      return false;
    }
  }
  ADD_FAILURE() << label << ": speculative " << idsToString(got) << " != greedy target-only "
                << idsToString(reference) << " (first difference at index " << i << ")";
  return false;
}

// Checks that the ledger describes `cache` of `role` exactly: one live entry
// per position 0..len-1, its token the token there (of `tokens`, by default
// the session's sequence; mid-round, the round's start sequence + drafts),
// and its stored K/V rows bit-identical to what the cache holds there.
inline void expectLedgerMatchesCache(const Session& session, CacheRole role, const std::string& where,
                                     const std::vector<int64_t>* tokens = nullptr) {
  const KvCache* cache = role == CacheRole::Target ? session.targetCache() : session.drafterCache();
  const KvLedger& ledger = session.ledger();
  const int64_t length = cache ? cache->length() : 0;
  if (cache) ASSERT_TRUE(cache->uniformLength()) << where;
  EXPECT_EQ(ledger.liveCount(role), length) << where << " (" << cacheRoleName(role) << ")";
  std::vector<int> seen(static_cast<size_t>(length), 0);
  const auto& sequence = tokens ? *tokens : session.sequence();
  for (const LedgerEntry& e : ledger.entries()) {
    if (e.cache != role || e.died_round >= 0) continue;
    ASSERT_GE(e.position, 0) << where;
    ASSERT_LT(e.position, length) << where << ": live " << cacheRoleName(role) << " entry beyond the cache length";
    ++seen[static_cast<size_t>(e.position)];
    ASSERT_LT(e.position, static_cast<int64_t>(sequence.size())) << where;
    EXPECT_EQ(e.token, sequence[static_cast<size_t>(e.position)])
        << where << ": " << cacheRoleName(role) << " entry at position " << e.position << " holds the wrong token";
    if (cache) {
      for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
        const auto k_cache = cache->keys(layer).select(1, e.position);  // [kv_heads, head_dim]
        const auto v_cache = cache->values(layer).select(1, e.position);
        EXPECT_TRUE(torch::equal(ledger.keys(e.row)[layer], k_cache.to(torch::kFloat32)))
            << where << ": K row of position " << e.position << " layer " << layer;
        EXPECT_TRUE(torch::equal(ledger.values(e.row)[layer], v_cache.to(torch::kFloat32)))
            << where << ": V row of position " << e.position << " layer " << layer;
      }
    }
  }
  for (int64_t p = 0; p < length; ++p) {
    EXPECT_EQ(seen[static_cast<size_t>(p)], 1) << where << ": " << cacheRoleName(role) << " position " << p;
  }
}

}  // namespace kvscope::testing_support
