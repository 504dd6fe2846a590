"""Greedy speculative decoding loops over the reference models, correct and
with real cache bugs, in every cache shape of hf_caches. docs/architecture.md's exact
bookkeeping: at round start both caches hold L-1 rows; the drafter feeds what
it lacks and drafts k; the target verifies [x[L-1], d1..dk]; n drafts are
accepted and the next token is the target's argmax at n; the target keeps
L+n rows, the drafter min(its rows, L+n)."""
import torch

from exact_bookkeeping import ExactBookkeeping
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
    # The cascade engines (check_cascades.py): each correct, then with one bug whose consequences cascade
    # into later rounds, the other model and the committed text; each reports to an ExactBookkeeping.
    "feed-from-length": ("correct: each model is fed what its cache lacks, read from the cache's own length "
                         "(the target as Hugging Face's assisted generation feeds it)", ("tuples", "dynamic", "layers")),
    "keep-rejected-feed-from-length": ("feed-from-length whose target prune keeps one rejected draft: the next verify, "
                                       "fed from the cache's length, never feeds the correction token",
                                       ("tuples", "dynamic", "layers")),
    "shared-positions": ("correct: one position counter kept by the drafter (cropped to len-2 and fed two tokens); "
                         "the verify's position_ids start where the drafter put x[L-1]", ("tuples", "dynamic", "layers")),
    "assistant-crop-off-by-one": ("shared-positions whose drafter is cropped to len-1: it is fed x[L-2] again a "
                                  "position late, and the target's verify inherits the shifted positions",
                                  ("tuples", "dynamic", "layers")),
    "counted-positions": ("correct: the target's position_ids come from the engine's count of its rows "
                          "(a verify adds what it fed, a rollback takes off what it removed)",
                          ("tuples", "dynamic", "layers", "static")),
    "positions-count-fed-tokens": ("counted-positions whose count never takes a rollback back: after the first "
                                   "rejection the verify is rotated too far and the committed text changes",
                                   ("tuples", "dynamic", "layers", "static")),
    "drafter-counted": ("correct: the committed length is read from the caught-up drafter's cache and the target "
                        "rolled back to it + n", ("tuples", "dynamic", "layers")),
    "drafter-keeps-rejected-target-follows": ("drafter-counted whose drafter is cropped to len(x), keeping a rejected "
                                              "draft: a round later the target, rolled back by the drafter's count, "
                                              "keeps one too", ("tuples", "dynamic", "layers")),
    "target-counted": ("correct: the drafter is cropped to the target's cache length at each round's start and fed "
                       "what it lacks", ("tuples", "dynamic", "layers", "static")),
    "target-keeps-rejected-drafter-follows": ("target-counted whose target prune keeps one rejected draft: the drafter, "
                                              "cropped to the target's length, keeps the same one",
                                              ("tuples", "dynamic", "layers", "static")),
}


class CacheSide:
    """One model, its cache object and the engine's count of the rows it holds."""

    def __init__(self, model, shape, roll_early=False, role=None, book=None):
        self.model = model
        self.shape = shape
        self.roll_early = roll_early
        self.role = role
        self.book = book  # an ExactBookkeeping the side reports each forward to, or None
        self.length = 0
        self.calls = 0
        self.rows = []  # what the cache holds, in the order a call attends it: (token, rotary position) or None
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
        positions = self.positions_applied(len(tokens), position_ids)
        if self.book is not None:
            self.book.forward(self, tokens, positions)
        with torch.no_grad():
            out = self.model(torch.tensor([tokens]), past_key_values=self.cache, use_cache=True, **kwargs)
        self.cache = out.past_key_values
        self.note_rows(tokens, positions)
        self.length += len(tokens)
        self.calls += 1
        return out.logits[0]

    def cache_length(self):
        """The rows the cache object says it holds (a fixed-size buffer has no
        such count: the engine's own)."""
        if self.shape in ("static", "ring"):
            return self.length
        if self.shape == "tuples":
            return 0 if self.cache is None else self.cache[0][0].shape[-2]
        return self.cache.get_seq_length()

    def positions_applied(self, count, position_ids):
        """The rotary positions the model gives `count` inputs: explicit position_ids,
        else cache_position (fixed-size buffers), else the cache's own length."""
        if position_ids is not None:
            return list(position_ids)
        start = self.length if self.shape in ("static", "ring") else self.cache_length()
        return list(range(start, start + count))

    def note_rows(self, tokens, positions):
        """Keeps `rows` in step with the cache after a call: appended, or written at
        cache_position in a static buffer (slots past them are not attended)."""
        written = list(zip(tokens, positions))
        if self.shape == "ring":
            return  # a ring's rows are its window: not tracked (no book runs over one)
        if self.shape == "static":
            kept = self.rows[:self.length] + [None] * (self.length - len(self.rows))
            self.rows = kept + written
        else:
            self.rows = self.rows + written

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
        self.rows = self.rows[:length]

    def reset(self):
        if self.shape == "static":
            self.cache.reset()
        else:
            self.cache = self.fresh()
        self.length = 0
        self.rows = []


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
    return propose(drafter, feed, k)


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


def speculative(target_model, drafter_model, prompt, new_tokens, gamma=4, shape="dynamic", bug=None, book=None):
    """Greedy speculative decoding; returns the token ids, prompt included. Reports
    to `book` (an ExactBookkeeping), which does not see attention masks."""
    book = ExactBookkeeping() if book is None else book
    target, drafter = sides(target_model, drafter_model, shape, book)
    x = list(prompt)
    end = len(x) + new_tokens
    position_counter = len(x) - 1
    hidden, last_rejected = set(), set()  # masked-rejected: the target's rows of rejected drafts
    if len(x) > 1:
        book.round_start(x)
        target.feed(x[:-1])
        drafter.feed(x[:-1])
    while len(x) < end:
        L = len(x)
        k = min(gamma, end - L - 1)
        book.round_start(x)
        drafts = draft(drafter, x, k, bug)
        book.drafted(drafts)
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
        book.pruned(x, target, drafter)
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


def sides(target_model, drafter_model, shape, book):
    """The target and drafter sides of a cascade engine, reporting to `book`."""
    return (CacheSide(target_model, shape, role="target", book=book),
            CacheSide(drafter_model, shape, role="drafter", book=book))


def propose(drafter, catch_up, k):
    """Feeds the drafter `catch_up` (what it lacks of the sequence) and drafts k
    tokens greedily: k forwards, the last draft never fed."""
    if k == 0:
        return []
    logits = drafter.feed(catch_up)
    drafts = []
    for i in range(k):
        drafts.append(int(logits[-1].argmax()))
        if i < k - 1:
            logits = drafter.feed([drafts[-1]])
    return drafts


def prefill(target, drafter, x, book):
    """Both caches get the prompt but its last token (L-1 rows)."""
    book.round_start(x)
    target.feed(x[:-1])
    drafter.feed(x[:-1])


def feed_from_length(target_model, drafter_model, prompt, new_tokens, gamma, shape, bug, book):
    """Each model is fed what its cache lacks, read from the cache object itself,
    as Hugging Face's assisted generation feeds its target: the verify is
    x[target's length:] + drafts, the picks the last k+1 logits (at most one per
    input), and a round always drafts (the output is cut at new_tokens).
    keep-rejected-feed-from-length: the target's prune keeps the first rejected
    draft, so the next verify, fed from the cache's length, never feeds the
    correction token."""
    target, drafter = sides(target_model, drafter_model, shape, book)
    x = list(prompt)
    end = len(x) + new_tokens
    prefill(target, drafter, x, book)
    while len(x) < end:
        L, k = len(x), min(gamma, end - len(x))
        book.round_start(x)
        drafts = propose(drafter, x[drafter.cache_length():], k)
        book.drafted(drafts)
        picks = argmax_rows(target.feed(x[target.cache_length():] + drafts))[-(k + 1):]
        n = accepted_count(drafts[:len(picks) - 1], picks)
        x += drafts[:n] + [picks[n]]
        keep = L + n + 1 if bug == "keep-rejected-feed-from-length" and n < k else L + n
        target.crop(keep)
        drafter.crop(min(drafter.length, L + n))
        book.pruned(x, target, drafter)
    return x[:end]


def shared_positions(target_model, drafter_model, prompt, new_tokens, gamma, shape, bug, book):
    """One position counter for both models, kept by the drafter: the assistant
    is cropped to len-2 and fed the last two tokens (Hugging Face's assisted
    generation), and the verify is given position_ids from the position the
    drafter gave the last of them, x[L-1].
    assistant-crop-off-by-one: the assistant is cropped to len-1, so it is fed
    x[L-2] again one position late, and the verify inherits the shift."""
    target, drafter = sides(target_model, drafter_model, shape, book)
    x = list(prompt)
    end = len(x) + new_tokens
    prefill(target, drafter, x, book)
    while len(x) < end:
        L, k = len(x), min(gamma, end - len(x) - 1)
        book.round_start(x)
        drafter.crop(L - 1 if bug == "assistant-crop-off-by-one" else L - 2)
        last = drafter.positions_applied(2, None)[-1]  # where the drafter puts x[L-1]
        drafts = propose(drafter, x[-2:], k)
        book.drafted(drafts)
        verify = [x[L - 1]] + drafts
        picks = argmax_rows(target.feed(verify, list(range(last, last + len(verify)))))
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        target.crop(L + n)
        book.pruned(x, target)  # the drafter is cropped at the next round's start
    return x


def counted_positions(target_model, drafter_model, prompt, new_tokens, gamma, shape, bug, book):
    """The target gets explicit position_ids from the engine's count of the rows
    its cache holds: each verify adds what it fed, each rollback takes off what
    it removed.
    positions-count-fed-tokens: the count is of every token ever fed, a rollback
    never takes it back, so the verify after the first rejection is rotated for
    positions k-n too far and its picks change the committed text."""
    target, drafter = sides(target_model, drafter_model, shape, book)
    x = list(prompt)
    end = len(x) + new_tokens
    prefill(target, drafter, x, book)
    held = len(x) - 1
    while len(x) < end:
        L, k = len(x), min(gamma, end - len(x) - 1)
        book.round_start(x)
        drafts = propose(drafter, x[drafter.length:], k)
        book.drafted(drafts)
        verify = [x[L - 1]] + drafts
        picks = argmax_rows(target.feed(verify, list(range(held, held + len(verify)))))
        held += len(verify)
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        removed = target.length - (L + n)
        target.crop(L + n)
        drafter.crop(min(drafter.length, L + n))
        if bug != "positions-count-fed-tokens":
            held -= removed
        book.pruned(x, target, drafter)
    return x


def drafter_counted(target_model, drafter_model, prompt, new_tokens, gamma, shape, bug, book):
    """The engine reads the committed length from the drafter: caught up (fed
    what it lacks, at least the last token), the drafter's cache holds the L
    committed tokens, and the target is rolled back to that count + n.
    drafter-keeps-rejected-target-follows: the drafter is cropped to len(x)
    instead of len(x)-1, keeping a rejected draft; the next round's count is one
    too many and the target's rollback keeps a rejected draft as well."""
    target, drafter = sides(target_model, drafter_model, shape, book)
    x = list(prompt)
    end = len(x) + new_tokens
    prefill(target, drafter, x, book)
    while len(x) < end:
        L, k = len(x), min(gamma, end - len(x) - 1)
        book.round_start(x)
        logits = drafter.feed(x[min(drafter.cache_length(), L - 1):])
        committed = drafter.cache_length()
        drafts = []
        for i in range(k):
            drafts.append(int(logits[-1].argmax()))
            if i < k - 1:
                logits = drafter.feed([drafts[-1]])
        book.drafted(drafts)
        picks = argmax_rows(target.feed([x[L - 1]] + drafts))
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        target.crop(committed + n)
        drafter.crop(len(x) if bug == "drafter-keeps-rejected-target-follows" else len(x) - 1)
        book.pruned(x, target, drafter)
    return x


def target_counted(target_model, drafter_model, prompt, new_tokens, gamma, shape, bug, book):
    """The engine counts only the target: at each round's start the drafter is
    cropped to the target's cache length (L-1 after a correct prune) and fed
    what it lacks, at least the last token.
    target-keeps-rejected-drafter-follows: the target's prune keeps the first
    rejected draft; the drafter, cropped to the target's length, keeps the same
    rejected draft, and both feed the correction a position late."""
    target, drafter = sides(target_model, drafter_model, shape, book)
    x = list(prompt)
    end = len(x) + new_tokens
    prefill(target, drafter, x, book)
    while len(x) < end:
        L, k = len(x), min(gamma, end - len(x) - 1)
        book.round_start(x)
        drafter.crop(target.cache_length())
        drafts = propose(drafter, x[min(drafter.cache_length(), L - 1):], k)
        book.drafted(drafts)
        picks = argmax_rows(target.feed([x[L - 1]] + drafts))
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        target.crop(L + n + 1 if bug == "target-keeps-rejected-drafter-follows" and n < k else L + n)
        book.pruned(x, target)  # the drafter is cropped at the next round's start
    return x


# A cascade loop -> (its engine, the bug it runs with, or None for the correct engine).
CASCADE_ENGINES = {
    "feed-from-length": (feed_from_length, None),
    "keep-rejected-feed-from-length": (feed_from_length, "keep-rejected-feed-from-length"),
    "shared-positions": (shared_positions, None),
    "assistant-crop-off-by-one": (shared_positions, "assistant-crop-off-by-one"),
    "counted-positions": (counted_positions, None),
    "positions-count-fed-tokens": (counted_positions, "positions-count-fed-tokens"),
    "drafter-counted": (drafter_counted, None),
    "drafter-keeps-rejected-target-follows": (drafter_counted, "drafter-keeps-rejected-target-follows"),
    "target-counted": (target_counted, None),
    "target-keeps-rejected-drafter-follows": (target_counted, "target-keeps-rejected-drafter-follows"),
}


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


def run_loop(name, target_model, drafter_model, prompt, new_tokens, shape, gamma=4, book=None):
    """Runs a loop of LOOPS by name; returns the token ids, prompt included. A
    cascade loop reports to `book` (an ExactBookkeeping; a fresh one if None)."""
    check_loop(name, shape)
    if name in CASCADE_ENGINES:
        engine, bug = CASCADE_ENGINES[name]
        return engine(target_model, drafter_model, prompt, new_tokens, gamma, shape, bug,
                      ExactBookkeeping() if book is None else book)
    if name == "greedy":
        return greedy(target_model, prompt, new_tokens, shape)
    if name == "window-roll-early":
        return greedy(target_model, prompt, new_tokens, shape, roll_early=True)
    if name == "hf-assisted":
        return hf_assisted(target_model, drafter_model, prompt, new_tokens, gamma, shape)
    return speculative(target_model, drafter_model, prompt, new_tokens, gamma, shape,
                       bug=None if name == "speculative" else name, book=book)
