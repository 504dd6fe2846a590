#include "core/cache/fault.h"

#include "core/error.h"

namespace kvscope {

const std::vector<FaultInfo>& allFaults() {
  static const std::vector<FaultInfo> faults = {
      {Fault::NoPrune, "no-prune",
       "After verification the target cache is not cut back: the K/V rows of rejected drafts stay, and every later "
       "token attends to them as if they were part of the text.",
       "The classic speculative-decoding bug: forgetting to roll back the cache after a rejection (engines that "
       "reuse a generate() cache without calling crop)."},
      {Fault::PruneShort, "prune-short",
       "The target prune removes one entry too few: the first rejected draft's K/V row survives at the position the "
       "correction token should occupy.",
       "Off-by-one in the rollback arithmetic (dropping gamma - n - 1 from the target instead of gamma - n)."},
      {Fault::PruneLongNoRefeed, "prune-long-no-refeed",
       "The target prune removes one entry too many and the engine never re-feeds the lost token: the cache is one "
       "row short and every later row sits one slot early.",
       "Off-by-one the other way, as in the seed document's formula (gamma - n + 1) without its re-feed step."},
      {Fault::ResetNotRollback, "reset-not-rollback",
       "Whenever a rollback is needed the whole target cache is cleared instead; the engine carries on feeding only "
       "the new tokens, so the model loses its whole context.",
       "Calling cache.reset()/clear() where crop(n) was meant (a frequent mistake when porting to static caches)."},
      {Fault::CropZeroNoop, "crop-zero-noop",
       "The rollback is computed relative to the round start (keep start + n rows) through a helper that treats a "
       "computed 0 as 'nothing to do': when no draft is accepted (n = 0) the rejected drafts stay in both caches.",
       "HF transformers #47433: a crop whose computed length is 0 (or 'all') is treated as a no-op."},
      {Fault::StaleRope, "stale-rope",
       "After a rollback the position counter is not rewound: new tokens get RoPE (or learned) positions as if the "
       "rejected drafts were still there, so their keys are rotated for the wrong position.",
       "The _seen_tokens / cache_position class of bug (HF transformers #30042): positions derived from a counter "
       "of tokens ever fed instead of the cache length."},
      {Fault::PartialLayerCrop, "partial-layer-crop",
       "Only the first half of the target's layers are cropped; the later layers keep the rejected drafts' rows.",
       "Cache classes whose crop loops over a subset of layers (e.g. skipping layers of another cache type in hybrid "
       "or sliding-window caches)."},
      {Fault::FullPrefixWithCache, "full-prefix-with-cache",
       "The verify pass feeds the whole sequence from position 0 although the cache already holds the prefix: the "
       "prefix's K/V rows are appended a second time and attended to twice.",
       "romsto/Speculative-Decoding issue #1: passing the full input_ids together with past_key_values."},
      {Fault::DrafterNotPruned, "drafter-not-pruned",
       "Only the target is rolled back; the drafter keeps its rejected drafts. The output stays correct (the target "
       "verifies everything) but the drafter's proposals degrade and acceptance drops.",
       "Engines that treat the drafter's cache as disposable and forget to crop it."},
      {Fault::HalfCache, "half-cache",
       "K and V are stored in fp16 and read back into fp32: every entry carries rounding drift (about 5e-4 relative). "
       "Not a logic bug; the diff must class it as numerical noise unless it flips a top-1 outside the margin.",
       "Engines that keep the KV cache in half precision to save memory (fp16 / bf16 / fp8 KV caches)."},
      {Fault::BonusNotFed, "bonus-not-fed",
       "After a round that accepts every draft, the bonus token's K/V row is never written: the next forward feeds "
       "it but its row is dropped, so the cache is one row short and every later row sits one slot early.",
       "Engines that append the bonus token to the output but skip it when catching the caches up (the "
       "all-accepted branch of a speculative loop, where the drafter and target both lag one token)."},
      {Fault::VerifyMaskLeak, "verify-mask-leak",
       "The verify pass builds no causal mask among the rows it appends: each draft query also sees the keys of "
       "the drafts after it. The K/V rows written are computed from leaked attention (wrong values from layer 1 "
       "on) and the verify logits are wrong.",
       "Attention masks built for one new token reused for a multi-token verify pass (e.g. passing "
       "is_causal=False or an all-ones mask when q_len > 1, as in several tree/speculative attention ports)."},
      {Fault::AppendReversed, "append-reversed",
       "A forward that appends several rows at once writes them in reverse order: row i holds the K/V of the "
       "token meant for row start + n - 1 - i. Invisible in one-token decoding; shows after prefill and verify.",
       "Scatter/index bugs in paged or ring-buffer caches where slot indices for a multi-token write are "
       "computed in the wrong order (e.g. a reversed slot mapping)."},
      {Fault::WindowRollEarly, "window-roll-early",
       "A sliding-window layer drops its oldest row one step too early: it keeps W - 2 rows before each new "
       "token instead of W - 1, so from position W - 1 on every query misses the oldest key of its window "
       "(W = sliding_window, the keys a query sees including itself). Needs a model with a sliding window.",
       "Hugging Face transformers 4.43's Gemma 2 HybridCache, which rolled its sliding ring one step early (the "
       "token landing on the last slot pushed out position 0 while it was still in the window): issue #37574, "
       "fixed in #38046."},
      {Fault::UniformAdvance, "uniform-advance",
       "A batch's rollback after verification moves every sequence's cache offset by the drafts the best sequence "
       "of the batch accepted: a sequence that accepted fewer keeps the K/V rows of its rejected drafts, and its next "
       "tokens are written after them and rotated for positions that many steps ahead. Needs a batch (several "
       "prompts); the sequence that accepted the most is unharmed.",
       "mlx-vlm PR 1155: a batched cache with one offset for all rows, advanced by the same block after a verify "
       "with per-row acceptance; llama.cpp issue 26741 (output garbles only with several parallel sequences and "
       "speculation together)."},
      {Fault::LengthNotRolledBack, "length-not-rolled-back",
       "A batch's rollback cuts every sequence's cache but the last one's: that sequence's length is never rolled "
       "back, so its rejected drafts' rows stay and every later token attends to them. Needs a batch (several "
       "prompts).",
       "Serving engines whose per-sequence length bookkeeping (a paged pool's per-sequence token count, "
       "llama.cpp's seq_rm per sequence id) is updated for some sequences of a batch and not others."},
      {Fault::FreedBlockReused, "freed-block-reused",
       "A paged cache's rollback returns the blocks past the kept rows to the pool but leaves them in the "
       "sequence's block table. The pool hands the most recently freed block out next, to another sequence of "
       "the batch (or to this one, for a later block): both then write their rows into the same block, and "
       "whichever wrote last is what the other attends. Needs --cache-layout paged (blocks small enough that a "
       "rollback frees one, e.g. paged:2); a batch shows one sequence overwriting another's rows.",
       "Paged serving engines whose block tables keep pointing at blocks the pool has handed elsewhere: vLLM PR "
       "56734 (speculative draft steps wrote K/V through stale block-table rows into blocks later requests read "
       "from the prefix cache; acceptance fell to zero for the conversations that hit them)."},
      {Fault::PaddingMaskDropped, "padding-mask-dropped",
       "A padded batch left-pads its shorter prompts and masks the pad rows in the prefill, but no later forward "
       "applies the padding mask: every draft and verify of a left-padded sequence attends to its pad rows as if "
       "they were text, so its tokens drift from the sequence decoded alone. Needs a batch in the padded layout "
       "(--batch-layout padded) with prompts of different lengths; the longest prompt has no pads and is unharmed.",
       "Decoding loops that pass attention_mask on the first step only: OpenNMT-py PR 2532 (outputs degraded with "
       "batches of uneven prompts until the padding mask was applied in all decoding steps, not just the first); "
       "TransformerLens PR 1617 (generate() merged a caller's attention_mask into step 0's arguments only, so the "
       "first token came out right and every later one drifted)."},
  };
  return faults;
}

const FaultInfo& faultInfo(Fault fault) {
  static const FaultInfo none{Fault::None, "none", "No fault: the cache is handled correctly.", ""};
  for (const FaultInfo& info : allFaults()) {
    if (info.fault == fault) return info;
  }
  return none;
}

bool needsSlidingWindow(Fault fault) { return fault == Fault::WindowRollEarly; }

bool needsBatch(Fault fault) {
  return fault == Fault::UniformAdvance || fault == Fault::LengthNotRolledBack || fault == Fault::PaddingMaskDropped;
}

bool needsPagedCache(Fault fault) { return fault == Fault::FreedBlockReused; }

bool needsPaddedBatch(Fault fault) { return fault == Fault::PaddingMaskDropped; }

bool breaksPaddedWrites(Fault fault) {
  return fault == Fault::AppendReversed || fault == Fault::BonusNotFed || fault == Fault::VerifyMaskLeak ||
         fault == Fault::FullPrefixWithCache;
}

Fault parseFault(const std::string& name) {
  if (name == "none" || name.empty()) return Fault::None;
  std::string names;
  for (const FaultInfo& info : allFaults()) {
    if (name == info.name) return info.fault;
    names += std::string(names.empty() ? "" : ", ") + info.name;
  }
  throw Error("unknown fault '" + name + "' (known: " + names + ")");
}

}  // namespace kvscope
