#include "core/decode/autoregressive.h"

#include <algorithm>

#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {

void checkFitsContext(const CausalLM& model, int64_t prompt_length, int64_t max_new_tokens) {
  require(prompt_length > 0, "the prompt is empty: give at least one token");
  require(max_new_tokens >= 0, "max new tokens must be >= 0, got " + std::to_string(max_new_tokens));
  const int64_t context = model.config().contextLength();
  if (prompt_length > context) {
    throw Error("the prompt has " + std::to_string(prompt_length) + " tokens, more than the model's context length " +
                std::to_string(context));
  }
  if (prompt_length + max_new_tokens > context) {
    throw Error("prompt (" + std::to_string(prompt_length) + " tokens) + max new tokens (" +
                std::to_string(max_new_tokens) + ") exceeds the model's context length " + std::to_string(context) +
                "; use at most " + std::to_string(context - prompt_length) + " new tokens");
  }
}

void checkCacheStaysValid(const CausalLM& model, int64_t prompt_length, int64_t max_new_tokens) {
  const RopeScaling& rope = model.config().rope_scaling;
  if (rope.type != RopeScaling::Type::LongRope) return;
  const int64_t original = rope.original_max_position_embeddings;
  // The first forward covers the prompt: past the threshold from the start
  // means long factors throughout, which a cache keeps consistent.
  if (prompt_length <= original && prompt_length + max_new_tokens > original) {
    throw Error("longrope: a cached run from " + std::to_string(prompt_length) + " to " +
                std::to_string(prompt_length + max_new_tokens) + " tokens crosses original_max_position_embeddings (" +
                std::to_string(original) + "), where " + model.config().architecture_name +
                " switches to its long rotary factors and every cached key becomes stale; kvscope does not re-encode "
                "the cache there. Run with the cache off, keep the context within " + std::to_string(original) +
                " tokens, or start with a prompt longer than " + std::to_string(original) + " tokens");
  }
}

namespace {

// Sliding-window layers keep only the window - 1 rows the next query (at
// next_position) can still see; the mask would hide the older ones anyway.
void dropRowsOutsideWindows(const ModelConfig& config, size_t next_position, KvCache& cache) {
  for (int64_t layer = 0; layer < cache.numLayers(); ++layer) {
    const int64_t window = config.windowOf(layer);
    if (window > 0) cache.evictBefore(layer, static_cast<int64_t>(next_position) - (window - 1));
  }
}

}  // namespace

GenerateResult generateAutoregressive(const CausalLM& model, const std::vector<int64_t>& prompt,
                                      const GenerateOptions& options, const std::vector<int64_t>& eos_ids) {
  checkFitsContext(model, static_cast<int64_t>(prompt.size()), options.max_new_tokens);
  if (options.use_cache) checkCacheStaysValid(model, static_cast<int64_t>(prompt.size()), options.max_new_tokens);
  options.sampling.validate();
  c10::InferenceMode guard;
  auto generator = makeGenerator(options.seed);
  auto cache = options.use_cache ? model.makeCache() : nullptr;

  std::vector<int64_t> sequence = prompt;
  GenerateResult result;
  while (static_cast<int64_t>(result.ids.size()) < options.max_new_tokens) {
    at::Tensor logits;  // [n, vocab]
    if (cache) {
      const int64_t fed = cache->endPosition(0);
      const std::vector<int64_t> pending(sequence.begin() + fed, sequence.end());
      logits = model.forward(idsTensor(pending), fed, cache.get(), nullptr, /*logit_rows=*/1);
      dropRowsOutsideWindows(model.config(), sequence.size(), *cache);
    } else {
      logits = model.forward(idsTensor(sequence), 0, nullptr, nullptr, /*logit_rows=*/1);
    }
    ++result.forward_calls;
    const auto probs = processedProbs(logits[-1], options.sampling);
    const int64_t next = options.sampling.greedy ? probs.argmax().item<int64_t>() : sampleFrom(probs, generator);
    sequence.push_back(next);
    result.ids.push_back(next);
    if (!options.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), next) != eos_ids.end()) {
      result.stopped_at_eos = true;
      break;
    }
  }
  return result;
}

}  // namespace kvscope
