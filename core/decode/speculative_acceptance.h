#pragma once
// The accept step of speculative decoding, on its own so it can be tested:
// exact speculative sampling (Leviathan et al. / Chen et al.) and the greedy
// exact-match rule.
#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace kvscope {

struct AcceptanceResult {
  int64_t accepted = 0;          // n: drafts kept
  int64_t next_token = -1;       // correction (n < drafts) or bonus (n == drafts)
  bool bonus = false;            // all of at least one draft accepted (never for k = 0)
  std::vector<double> uniforms;  // the draws compared with p/q (sampling only)
};

// drafts: [k]; q: [k, vocab] drafter distributions; p: [k + 1, vocab] target
// distributions (both already processed with the same sampling settings).
// Sampling: accept d_i with probability min(1, p_i(d_i) / q_i(d_i)); at the
// first rejection draw the correction from norm(max(0, p_i - q_i)); when all
// are accepted draw the bonus from p_{k+1}.
AcceptanceResult acceptSampled(const std::vector<int64_t>& drafts, const at::Tensor& q, const at::Tensor& p,
                               at::Generator& generator);

// Greedy: accept d_i iff it is argmax p_i; the next token is argmax p_{n+1}.
// The output is token for token the greedy target-only output. p: [k + 1,
// vocab], the target's distributions or its logits (the same argmax).
AcceptanceResult acceptGreedy(const std::vector<int64_t>& drafts, const at::Tensor& p);

}  // namespace kvscope
