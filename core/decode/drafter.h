#pragma once
// Where draft tokens come from. The session runs the drafting loop itself
// (so that every cache operation is recorded); a drafter says what it is.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"

namespace kvscope {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string describe() const = 0;
  // The drafting network, or nullptr for a model-free drafter.
  virtual const CausalLM* model() const { return nullptr; }
};

// A second, smaller checkpoint with the target's vocabulary.
class ModelDrafter : public Drafter {
 public:
  explicit ModelDrafter(std::shared_ptr<const CausalLM> model, std::string name = "model");
  std::string describe() const override;
  const CausalLM* model() const override { return model_.get(); }

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
  std::string describe() const override;
  // gamma tokens, or none when nothing matches.
  std::vector<int64_t> propose(const std::vector<int64_t>& sequence, int64_t gamma) const;

 private:
  int64_t max_ngram_;
};

}  // namespace kvscope
