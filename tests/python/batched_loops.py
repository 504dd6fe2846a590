"""Batched greedy decoding loops over the reference models, written the way
users write them: B prompts of different lengths, left padding, a 2-D padding
attention mask and explicit position_ids, one DynamicCache of
[B, kv_heads, slots, head_dim] per model.

Every loop keeps its own bookkeeping (`BatchRun`): per call the inputs, the
positions and the mask it passed, and what each sequence's slots should hold
afterwards (padding slots first, then the sequence's rows: the caches are
right-aligned). A buggy loop also records where that bookkeeping first
departed from a correct loop's (`BatchRun.departure`: sequence, role, call,
operation), so a test or a checker can compare its verdict with the truth.

Loops:
* `batched_greedy`: HF generate()'s batched greedy decoding: the padded
  prompts in one call, then one token per sequence per call, position_ids
  from the mask's cumulative sum (pads at 1), the mask grown by one column.
* `batched_speculative`: greedy speculative decoding with per-row acceptance.
  Each round the drafter is fed every sequence's last token and drafts gamma
  tokens ([B, 1] calls, gamma + 1 of them: the last writes d_gamma's row); the
  target verifies [x[L-1], d1..d_gamma] ([B, gamma + 1]); sequence b accepts
  n_b drafts plus the target's token. Per-row rollback: both caches keep
  L_b + n_b rows of sequence b; the rows of a sequence that accepted fewer
  drafts than the most accepting one are shifted right by the difference (its
  rejected tail rolls to the front, where the mask hides it as padding), so
  every sequence's rows end at the last slot again.
* `bug="uniform-advance"`: after verify every sequence's cache offset is
  advanced by the same block, the most accepting sequence's n + 1: the tails
  of under-accepting sequences keep rejected drafts, attended, and their
  position counters run ahead of their sequences.
* `bug="keep-one-rejected"`: the target's per-row rollback keeps one row too
  many in every sequence that rejected a draft (an off-by-one in keep).
* `bug="positions-not-rolled-back"`: the target's per-row rollback cuts the
  rows but leaves each sequence's position counter where the verify left it:
  the next verify rotates its inputs as if the rejected drafts were there.

Departures come from the loop's own books, not from the bug's name: after
each rollback a sequence must hold every token of its sequence but the last
(`len(x_b) - 1` rows), and each call must feed a sequence at the position
that follows the rows it holds."""
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from hf_caches import DynamicCache

PAD = 0
BUGS = ("uniform-advance", "keep-one-rejected", "positions-not-rolled-back")


@dataclass
class CallRecord:
    """What a loop passed to one forward call and what it expects the cache to hold after it."""
    role: str
    index: int                    # the role's forward count from 0
    input_ids: List[List[int]]    # [B][n], pads included
    position_ids: List[List[int]]  # [B][n]
    mask: torch.Tensor            # bool [B, K] passed (K = slots after the call)
    padding_after: List[int]      # per sequence: the padding slots at the front after the call
    rows_after: List[int]         # per sequence: its rows after the padding (the slots after the call = K)


@dataclass
class Rollback:
    """A rollback between two calls of a role: each sequence keeps `kept[b]` rows."""
    role: str
    before_call: int  # the index of the role's next call, whose `before` state shows it
    kept: List[int]


@dataclass
class BatchRun:
    sequences: List[List[int]]          # per sequence, prompt included, no padding
    calls: List[CallRecord] = field(default_factory=list)
    rollbacks: List[Rollback] = field(default_factory=list)
    accepted: List[List[int]] = field(default_factory=list)  # per round, n_b per sequence
    departure: Optional[dict] = None    # where a buggy loop's bookkeeping first departed, None when correct
    departures: dict = field(default_factory=dict)  # role -> the first departure of that role

    def calls_of(self, role):
        return [call for call in self.calls if call.role == role]


class BatchSide:
    """One model, its batched DynamicCache and the loop's count of each sequence's
    rows. The cache is right-aligned: sequence b's rows are the last
    lengths[b] slots; `mask` [B, slots] is False on the padding before them."""

    def __init__(self, model, role, run, batch):
        self.model = model
        self.role = role
        self.run = run
        self.cache = DynamicCache()
        self.mask = torch.zeros(batch, 0, dtype=torch.bool)
        self.lengths = [0] * batch  # rows held per sequence, as the loop believes
        self.positions = [0] * batch  # the next position per sequence, as the loop believes
        self.calls = 0

    def slots(self):
        return self.mask.shape[1]

    def feed(self, inputs, real=None):
        """inputs [B][n]; real: bool [B, n] (False on pads, default all True).
        Feeds them at each sequence's next positions; returns logits [B, n, vocab]."""
        batch, n = len(inputs), len(inputs[0])
        real = torch.ones(batch, n, dtype=torch.bool) if real is None else real
        ahead = [b for b in range(batch) if self.positions[b] != self.lengths[b]]
        if ahead:  # the loop feeds a sequence at a position its rows do not reach
            note_departure(self.run, self.role, ahead[0], self.calls, "forward")
        position_ids = []
        for b in range(batch):
            row, next_position = [], self.positions[b]
            for i in range(n):
                row.append(next_position if real[b, i] else 1)  # HF generate: pads at position 1
                next_position += int(real[b, i])
            position_ids.append(row)
        self.mask = torch.cat([self.mask, real], 1)  # [B, slots + n]
        with torch.no_grad():
            out = self.model(torch.tensor(inputs), attention_mask=self.mask.long(),
                             position_ids=torch.tensor(position_ids), past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        for b in range(batch):
            added = int(real[b].sum())
            self.lengths[b] += added
            self.positions[b] += added
        self.run.calls.append(CallRecord(self.role, self.calls, [list(row) for row in inputs], position_ids,
                                         self.mask.clone(), [self.slots() - length for length in self.lengths],
                                         list(self.lengths)))
        self.calls += 1
        return out.logits

    def rollback(self, keep, positions=True):
        """Sequence b keeps its first keep[b] rows: each cache row is cut at the
        least dropping sequence's end and rolled right by its extra drop, so every
        sequence's rows end at the last slot; the rolled-in tail is padding.
        positions=False: the position counters stay (a bug)."""
        drop = [self.lengths[b] - keep[b] for b in range(len(keep))]
        counters = list(self.positions)
        self.align(drop, keep)
        if not positions:
            self.positions = counters
        self.run.rollbacks.append(Rollback(self.role, self.calls, list(keep)))

    def advance_uniformly(self, drop):
        """The uniform-advance bug: every sequence drops the same `drop` rows."""
        batch = len(self.lengths)
        self.align([drop] * batch, [length - drop for length in self.lengths])

    def align(self, drop, keep):
        cut = min(drop)
        slots = self.slots() - cut
        shifts = [d - cut for d in drop]
        for layer in range(len(self.cache.key_cache)):
            for store in (self.cache.key_cache, self.cache.value_cache):
                kept = store[layer][:, :, :slots]  # [B, kv_heads, slots, head_dim]
                store[layer] = torch.stack([torch.roll(kept[b], shifts[b], dims=1) for b in range(len(drop))])
        mask = self.mask[:, :slots].clone()
        for b, shift in enumerate(shifts):
            mask[b] = torch.roll(mask[b], shift)
            mask[b, :shift] = False
        self.mask = mask
        self.cache._seen_tokens = slots
        for b in range(len(keep)):
            self.positions[b] -= self.lengths[b] - keep[b]
            self.lengths[b] = keep[b]


def left_padded(prompts):
    """Prompts -> (ids [B][P] with PAD in front, real bool [B, P])."""
    width = max(len(prompt) for prompt in prompts)
    ids = [[PAD] * (width - len(prompt)) + list(prompt) for prompt in prompts]
    real = torch.tensor([[i >= width - len(prompt) for i in range(width)] for prompt in prompts])
    return ids, real


def batched_greedy(model, prompts, new_tokens):
    """HF generate()-style batched greedy decoding with left padding."""
    run = BatchRun([list(prompt) for prompt in prompts])
    side = BatchSide(model, "target", run, len(prompts))
    ids, real = left_padded(prompts)
    logits = side.feed(ids, real)
    for step in range(new_tokens):
        picks = logits[:, -1].argmax(-1).tolist()
        for b, token in enumerate(picks):
            run.sequences[b].append(int(token))
        if step < new_tokens - 1:
            logits = side.feed([[int(token)] for token in picks])
    return run


def accepted_count(drafts, picks):
    n = 0
    while n < len(drafts) and drafts[n] == picks[n]:
        n += 1
    return n


def batched_speculative(target_model, drafter_model, prompts, new_tokens, gamma=4, bug=None):
    """Greedy speculative decoding of B prompts with per-row acceptance; runs
    rounds until every sequence has at least new_tokens new tokens."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; one of {', '.join(BUGS)}")
    batch = len(prompts)
    run = BatchRun([list(prompt) for prompt in prompts])
    target = BatchSide(target_model, "target", run, batch)
    drafter = BatchSide(drafter_model, "drafter", run, batch)
    ids, real = left_padded([prompt[:-1] for prompt in prompts])
    target.feed(ids, real)
    drafter.feed(ids, real)
    x = run.sequences
    ends = [len(prompt) + new_tokens for prompt in prompts]
    while any(len(x[b]) < ends[b] for b in range(batch)):
        lengths = [len(sequence) for sequence in x]
        drafts = [[] for _ in range(batch)]
        logits = drafter.feed([[sequence[-1]] for sequence in x])
        for i in range(gamma):
            for b in range(batch):
                drafts[b].append(int(logits[b, -1].argmax()))
            logits = drafter.feed([[row[-1]] for row in drafts])  # the last call writes d_gamma's row
        verify = [[x[b][-1]] + drafts[b] for b in range(batch)]
        picks = target.feed(verify).argmax(-1).tolist()  # [B][gamma + 1]
        accepted = [accepted_count(drafts[b], picks[b]) for b in range(batch)]
        run.accepted.append(accepted)
        for b in range(batch):
            x[b] += drafts[b][:accepted[b]] + [picks[b][accepted[b]]]
        keep = [lengths[b] + accepted[b] for b in range(batch)]  # L_b + n_b rows: all of x_b but its last token
        for side in (target, drafter):
            if bug == "uniform-advance":
                side.advance_uniformly(gamma - max(accepted))
            elif bug == "keep-one-rejected" and side is target:
                side.rollback([keep[b] + (accepted[b] < gamma) for b in range(batch)])
            elif bug == "positions-not-rolled-back" and side is target:
                side.rollback(keep, positions=False)
            else:
                side.rollback(keep)
            wrong = [b for b in range(batch) if side.lengths[b] != len(x[b]) - 1]
            if wrong:  # the rollback left a sequence with other rows than its tokens but the last
                note_departure(run, side.role, wrong[0], side.calls, "between")
    return run


def note_departure(run, role, sequence, call, operation):
    """The first departure of `role` from the books (sequence, the role's call
    whose forward or `before` state shows it, forward or between); the run's
    departure is the first in the loop's own order of operations."""
    if role in run.departures:
        return
    run.departures[role] = {"sequence": sequence, "role": role, "call": call, "operation": operation}
    if run.departure is None:
        run.departure = dict(run.departures[role])
