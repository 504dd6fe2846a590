"""Greedy speculative decoding loops over the reference models, correct and
with real cache bugs, in every cache shape of hf_caches. DESIGN.md's exact
bookkeeping: at round start both caches hold L-1 rows; the drafter feeds what
it lacks and drafts k; the target verifies [x[L-1], d1..dk]; n drafts are
accepted and the next token is the target's argmax at n; the target keeps
L+n rows, the drafter min(its rows, L+n)."""
import torch

from hf_caches import DynamicCache, LayeredDynamicCache, SlidingWindowCache, StaticCache

SHAPES = ("tuples", "dynamic", "layers", "static", "ring")
STATIC_SLOTS = 160

# Loop name -> (description, cache shapes it runs in).
LOOPS = {
    "speculative": ("correct greedy speculative decoding", ("tuples", "dynamic", "layers", "static")),
    "hf-assisted": ("HF assisted generation: no prefill, the assistant cropped to len-2 with crop() and fed 2 tokens",
                    ("tuples", "dynamic", "layers")),
    "greedy": ("target-only greedy decoding, one token per call after the prompt", SHAPES),
    "prefix-refed": ("the drafter is fed the whole sequence each round although its cache holds the prefix",
                     ("tuples", "dynamic", "layers")),
    "keep-one-rejected": ("the target prune keeps one rejected draft (keeps L+n+1 rows)", ("tuples", "dynamic", "layers", "static")),
    "reset-not-rollback": ("the target cache is reset where a rollback was needed", ("tuples", "dynamic", "layers", "static")),
    "crop0-noop": ("the prune crops to round start + n through a helper that skips a computed 0: "
                   "with n = 0 the rejected drafts stay in both caches", ("tuples", "dynamic", "layers")),
    "positions-plus-one": ("the target's explicit position_ids advance by 1 per round instead of n+1 "
                           "(transformers #30042)", ("tuples", "dynamic", "layers")),
    "verify-mask-leak": ("the verify pass gets an all-true 4-D mask: no causal mask among the drafts",
                         ("tuples", "dynamic", "layers")),
    "window-roll-early": ("a sliding-window ring that rolls one step early (transformers #37574)", ("ring",)),
    "masked-rejected": ("correct: the target keeps rejected drafts in its cache and hides them with a 4-D mask, "
                        "feeding at the true positions (as tree-attention engines do)", ("tuples", "dynamic", "layers")),
    "masked-rejected-forgets": ("as masked-rejected, but the mask hides only the rows rejected before the last round",
                                ("tuples", "dynamic", "layers")),
    "bonus-not-fed": ("after an all-accepted round the drafter is fed d_gamma but never the bonus token",
                      ("tuples", "dynamic", "layers", "static")),
}


class CacheSide:
    """One model, its cache object and the engine's count of the rows it holds."""

    def __init__(self, model, shape, roll_early=False):
        self.model = model
        self.shape = shape
        self.roll_early = roll_early
        self.length = 0
        self.calls = 0
        self.cache = self.fresh()

    def fresh(self):
        cfg = self.model.config
        dims = (cfg.num_hidden_layers, cfg.num_key_value_heads, self.model.head_dim)
        if self.shape == "tuples":
            return None
        if self.shape == "dynamic":
            return DynamicCache()
        if self.shape == "layers":
            return LayeredDynamicCache(cfg.num_hidden_layers)
        if self.shape == "static":
            return StaticCache(*dims, STATIC_SLOTS)
        if self.shape == "ring":
            return SlidingWindowCache(*dims, cfg.sliding_window, roll_early=self.roll_early)
        raise ValueError(f"unknown cache shape {self.shape!r}")

    def feed(self, tokens, position_ids=None, attention_mask=None):
        """Feeds tokens at the next positions; returns their logits [n, vocab]."""
        kwargs = {}
        if self.shape in ("static", "ring"):
            kwargs["cache_position"] = torch.arange(self.length, self.length + len(tokens))
        if position_ids is not None:
            kwargs["position_ids"] = torch.tensor([position_ids])
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        with torch.no_grad():
            out = self.model(torch.tensor([tokens]), past_key_values=self.cache, use_cache=True, **kwargs)
        self.cache = out.past_key_values
        self.length += len(tokens)
        self.calls += 1
        return out.logits[0]

    def key_slots_after(self, count):
        """Keys a call of `count` tokens attends to (the width of a 4-D mask)."""
        return STATIC_SLOTS if self.shape == "static" else self.length + count

    def crop(self, length):
        """Rolls back to `length` rows: crop() on cache objects, slicing on tuples;
        a static cache just writes the next call at cache_position = length."""
        if length >= self.length:
            return
        if self.shape == "tuples":
            self.cache = tuple((k[:, :, :length], v[:, :, :length]) for k, v in self.cache)
        elif self.shape in ("dynamic", "layers"):
            self.cache.crop(length)
        elif self.shape == "ring":
            raise ValueError("a ring buffer cannot roll back")
        self.length = length

    def reset(self):
        if self.shape == "static":
            self.cache.reset()
        else:
            self.cache = self.fresh()
        self.length = 0


def argmax_rows(logits):
    return logits.argmax(-1).tolist()


def accepted_count(drafts, picks):
    n = 0
    while n < len(drafts) and drafts[n] == picks[n]:
        n += 1
    return n


def draft(drafter, x, k, bug):
    """The drafter catches up and proposes k tokens greedily (k forwards)."""
    if k == 0:
        return []
    feed = x[drafter.length:]
    if bug == "prefix-refed":
        feed = list(x)
    elif bug == "bonus-not-fed" and drafter.length == len(x) - 2:
        feed = x[drafter.length:-1]  # d_gamma only: the bonus token is never fed
    logits = drafter.feed(feed)
    drafts = []
    for i in range(k):
        drafts.append(int(logits[-1].argmax()))
        if i < k - 1:
            logits = drafter.feed([drafts[-1]])
    return drafts


def prune(target, drafter, keep, n, k, bug):
    """Both caches back to `keep` = L+n rows (the drafter may be one short)."""
    if bug == "crop0-noop":
        if n:  # the helper treats a computed 0 as "nothing to do"...
            target.crop(keep)
            drafter.crop(min(drafter.length, keep))
        else:  # ...while the loop's bookkeeping believes both caches were cut
            target.length = keep
            drafter.length = min(drafter.length, keep)
        return
    if bug == "keep-one-rejected" and n < k:
        target.crop(keep + 1)
    elif bug == "reset-not-rollback" and n < k:
        target.reset()
    else:
        target.crop(keep)
    drafter.crop(min(drafter.length, keep))


def masked_verify(target, verify, start, hidden):
    """Feeds `verify` at positions start.. over every row the target holds, the
    rows in `hidden` masked out, causal among the inputs; returns the logits."""
    held, q = target.length, len(verify)
    mask = torch.zeros(1, 1, q, held + q, dtype=torch.bool)
    visible = [row for row in range(held) if row not in hidden]
    mask[0, 0, :, visible] = True
    for i in range(q):
        mask[0, 0, i, held:held + i + 1] = True
    return target.feed(verify, list(range(start, start + q)), mask)


def speculative(target_model, drafter_model, prompt, new_tokens, gamma=4, shape="dynamic", bug=None):
    """Greedy speculative decoding; returns the token ids, prompt included."""
    target, drafter = CacheSide(target_model, shape), CacheSide(drafter_model, shape)
    x = list(prompt)
    end = len(x) + new_tokens
    position_counter = len(x) - 1
    hidden, last_rejected = set(), set()  # masked-rejected: the target's rows of rejected drafts
    if len(x) > 1:
        target.feed(x[:-1])
        drafter.feed(x[:-1])
    while len(x) < end:
        L = len(x)
        k = min(gamma, end - L - 1)
        drafts = draft(drafter, x, k, bug)
        verify = [x[L - 1]] + drafts
        position_ids = list(range(position_counter, position_counter + len(verify))) \
            if bug == "positions-plus-one" else None
        mask = torch.ones(1, 1, len(verify), target.key_slots_after(len(verify)), dtype=torch.bool) \
            if bug == "verify-mask-leak" else None
        if bug in ("masked-rejected", "masked-rejected-forgets"):
            held = target.length
            shown = hidden - last_rejected if bug == "masked-rejected-forgets" else hidden
            picks = argmax_rows(masked_verify(target, verify, L - 1, shown))
            n = accepted_count(drafts, picks)
            last_rejected = set(range(held + 1 + n, held + len(verify)))  # the rows of drafts[n:]
            hidden |= last_rejected
            x += drafts[:n] + [picks[n]]
            drafter.crop(min(drafter.length, L + n))
            continue
        picks = argmax_rows(target.feed(verify, position_ids, mask))
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        prune(target, drafter, L + n, n, k, bug)
        position_counter += 1 if bug == "positions-plus-one" else n + 1
    return x


def hf_assisted(target_model, drafter_model, prompt, new_tokens, gamma=4, shape="dynamic"):
    """HF assisted generation (4.43, constant schedule): no separate prefill; each
    round the assistant is cropped to len-2 and fed the last two tokens; the
    target feeds everything it lacks plus the drafts and is cropped to len-1."""
    target, drafter = CacheSide(target_model, shape), CacheSide(drafter_model, shape)
    x = list(prompt)
    end = len(x) + new_tokens
    while len(x) < end:
        L = len(x)
        k = min(gamma, end - L - 1)
        drafts = []
        if k > 0:
            if drafter.length > 0:
                drafter.crop(L - 2)
            logits = drafter.feed(x[drafter.length:])
            for i in range(k):
                drafts.append(int(logits[-1].argmax()))
                if i < k - 1:
                    logits = drafter.feed([drafts[-1]])
        picks = argmax_rows(target.feed(x[target.length:] + drafts)[-(k + 1):])
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        target.crop(len(x) - 1)
    return x


def greedy(model, prompt, new_tokens, shape="dynamic", roll_early=False):
    """Target-only greedy decoding: the prompt in one call, then one token per call."""
    side = CacheSide(model, shape, roll_early=roll_early)
    x = list(prompt)
    for _ in range(new_tokens):
        x.append(int(side.feed(x[side.length:])[-1].argmax()))
    return x


def check_loop(name, shape):
    if name not in LOOPS:
        raise ValueError(f"unknown loop {name!r}; one of {', '.join(LOOPS)}")
    if shape not in LOOPS[name][1]:
        raise ValueError(f"loop {name} runs in the cache shapes {', '.join(LOOPS[name][1])}, not {shape}")


def run_loop(name, target_model, drafter_model, prompt, new_tokens, shape, gamma=4):
    """Runs a loop of LOOPS by name; returns the token ids, prompt included."""
    check_loop(name, shape)
    if name == "greedy":
        return greedy(target_model, prompt, new_tokens, shape)
    if name == "window-roll-early":
        return greedy(target_model, prompt, new_tokens, shape, roll_early=True)
    if name == "hf-assisted":
        return hf_assisted(target_model, drafter_model, prompt, new_tokens, gamma, shape)
    return speculative(target_model, drafter_model, prompt, new_tokens, gamma, shape,
                       bug=None if name == "speculative" else name)
