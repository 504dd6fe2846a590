#pragma once
// Session options for tests of the one declaration (core/decode/session_options.h)
// and of the front ends that show it.
#include "core/decode/session_options.h"

namespace kvscope {

// Every field away from its default.
inline SessionOptions unusualOptions() {
  SessionOptions o;
  o.gamma = 7;
  o.adaptive_gamma = true;
  o.gamma_min = 2;
  o.gamma_max = 9;
  o.draft_confidence = 0.375;
  o.max_new_tokens = 33;
  o.sampling.greedy = false;
  o.sampling.temperature = 0.75;
  o.sampling.top_k = 40;
  o.sampling.top_p = 0.875;
  o.seed = 123;
  o.bookkeeping = Bookkeeping::Seed;
  o.ignore_eos = true;
  o.record_attention = false;
  o.record_logits = false;
  o.trace_budget_mb = 5;
  o.fault = Fault::PruneShort;
  o.eviction = parseSessionEviction("h2o:0.25:every=4");
  return o;
}

}  // namespace kvscope
