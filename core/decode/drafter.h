#pragma once
// Where draft tokens come from. The session runs the speculative loop (draft,
// verify, accept, prune) and asks its drafter for each round's drafts; a
// drafter says what it is and drafts through the steps the session hands it,
// so every write into a drafter's cache goes through the session's tracked
// cache (core/cache/tracked_cache.h) and is logged.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/cache/tracked_cache.h"
#include "core/decode/sampling.h"
#include "core/model/causal_lm.h"
#include "core/model/probe.h"

namespace kvscope {

enum class DrafterType {
  Model,            // a network drafting over its own cache (a second checkpoint, or the target itself)
  PromptLookup,     // n-gram lookup in the sequence so far: no network, no cache
  CompressedCache,  // a network (normally the target) over a copy of its cache compressed after the
                    // prefill: self-speculation (core/compress/self_speculation_drafter.h)
};

// What a drafter is given for one round's draft phase.
struct DraftRequest {
  const std::vector<int64_t>& sequence;  // the prompt and every emitted token
  int64_t gamma = 0;                     // at most this many drafts
  const SamplingSettings& sampling;
  at::Generator& generator;
  const std::vector<int64_t>& eos_ids;  // drafting stops after proposing one of these...
  bool ignore_eos = false;              // ...unless this is set
  int64_t vocab = 0;
  // Feeds the drafter's network through its tracked cache: `stream` is what
  // the cache should hold followed by the new tokens; only the tokens it does
  // not hold yet are fed, at explicit positions, and the write is logged.
  // Returns the logits after the last token of stream, [vocab] float32.
  std::function<at::Tensor(const std::vector<int64_t>& stream)> feed;
  // Drafting stops after a draft the drafter gave a probability below this
  // (Hugging Face's assistant_confidence_threshold: the unlikely draft is
  // still proposed). 0: every round drafts gamma tokens.
  double stop_below = 0.0;

  bool stopsAt(int64_t token) const;
};

// One round's drafts.
struct Draft {
  std::vector<int64_t> tokens;      // d_1 .. d_k, k <= gamma
  std::vector<double> q_of_picks;   // q_i(d_i); greedy: the drafter's softmax probability of its pick
  at::Tensor q;       // [k, vocab] processed drafter distributions; undefined when greedy with a network
  at::Tensor logits;  // [k, vocab] the network's logits; undefined without a network
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual DrafterType type() const = 0;
  virtual std::string describe() const = 0;
  // The network that drafts, whose cache the session keeps and logs as the
  // drafter's; nullptr for a drafter without one (prompt lookup).
  virtual const CausalLM* model() const { return nullptr; }
  // Up to request.gamma drafts after request.sequence (none: a plain target step).
  virtual Draft draft(const DraftRequest& request) const = 0;
  // The prefill of the drafter's cache (drafters with a model only):
  // feed_prefix(probes) feeds every prompt token but the last through
  // `cache`, a logged write, recording into probes (may be nullptr). A
  // drafter that changes its cache after the prefill (compresses it) does so
  // here, through `cache`, where it is logged at `moment`.
  virtual void prefill(TrackedCache& cache, const Moment& moment,
                       const std::function<void(ProbeSink*)>& feed_prefix) const;
};

// A network with the target's vocabulary drafting autoregressively over its
// own cache: a second, smaller checkpoint, or the target itself.
class ModelDrafter : public Drafter {
 public:
  explicit ModelDrafter(std::shared_ptr<const CausalLM> model, std::string name = "model");
  DrafterType type() const override { return DrafterType::Model; }
  std::string describe() const override;
  const CausalLM* model() const override { return model_.get(); }
  // Greedy: each draft is the argmax of the drafter's logits. Sampled: drawn
  // from the processed distribution q (the same processing as the target's p).
  // A draft's confidence, which request.stop_below is compared with, is its
  // q_of_picks entry.
  Draft draft(const DraftRequest& request) const override;

 private:
  std::shared_ptr<const CausalLM> model_;
  std::string name_;
};

// Prompt lookup: finds the latest earlier occurrence of the sequence's last
// n tokens (trying n, n-1, ..., 1) and proposes the tokens that followed it
// (continued periodically when they run into the end of the sequence, so a
// repeating output gets full-length proposals).
// Its proposals are deterministic (q is one-hot), which keeps speculative
// sampling exact: accept with p(d), resample from p without d.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int64_t max_ngram);
  DrafterType type() const override { return DrafterType::PromptLookup; }
  std::string describe() const override;
  Draft draft(const DraftRequest& request) const override;
  // gamma tokens, or none when nothing matches.
  std::vector<int64_t> propose(const std::vector<int64_t>& sequence, int64_t gamma) const;

 private:
  int64_t max_ngram_;
};

}  // namespace kvscope
