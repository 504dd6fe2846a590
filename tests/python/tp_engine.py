"""A tensor-parallel speculative decoding engine over torch.distributed,
written the way Megatron-style tensor parallelism is written: each rank holds
a contiguous share of every layer's attention heads (its query heads and the
KV heads they read, so its KV cache holds only those heads) and of the MLP's
intermediate features; the attention output and MLP projections are summed
across ranks with all_reduce; embeddings, norms and the LM head are
replicated, so every rank gets the full logits and takes the same greedy
decisions. Positions are the engine's (the scheduler's count), passed as
position_ids, the same on every rank, as serving engines pass them.

Every rank runs the same loop in lockstep and records its own capture
(kvscope_capture.Recorder(..., shard=(rank, ranks))). Each rank's KV manager
keeps its own cache and applies the engine's rollback to it. Bugs, each in
one rank's KV manager only (the other ranks roll back correctly):
* `rank-keeps-rejected`: the rank's target rollback keeps one row too many
  when a draft was rejected (an off-by-one in a rank-local keep count);
* `rank-drafter-not-cropped`: the rank's drafter cache is not cut back when
  drafts were rejected (a rank-local rollback skipped).

The loop keeps its own books: after every rollback each rank's cache must
hold every committed token but the last (the target) or what the drafter
may keep; a rank whose rows differ records its first departure (rank, role,
the role's next call, between, and whether anything was cut)."""
import json
import os

import torch
import torch.distributed as dist

from hf_caches import DynamicCache
from llama_ref import LlamaRef

BUGS = ("rank-keeps-rejected", "rank-drafter-not-cropped")


class ShardedLlama(LlamaRef):
    """LlamaRef with this rank's share of each layer; the config stays the
    model's (a tensor-parallel engine's modules report the whole model's)."""

    def __init__(self, model_dir, rank, ranks):
        super().__init__(model_dir)
        cfg = self.config
        heads, kv_heads = cfg.num_attention_heads // ranks, cfg.num_key_value_heads // ranks
        inner = cfg.intermediate_size // ranks
        d = self.head_dim
        for layer in range(cfg.num_hidden_layers):
            attn, mlp = f"model.layers.{layer}.self_attn.", f"model.layers.{layer}.mlp."
            self.take_rows(attn + "q_proj.weight", rank * heads * d, heads * d)
            self.take_rows(attn + "k_proj.weight", rank * kv_heads * d, kv_heads * d)
            self.take_rows(attn + "v_proj.weight", rank * kv_heads * d, kv_heads * d)
            self.take_columns(attn + "o_proj.weight", rank * heads * d, heads * d)
            self.take_rows(mlp + "gate_proj.weight", rank * inner, inner)
            self.take_rows(mlp + "up_proj.weight", rank * inner, inner)
            self.take_columns(mlp + "down_proj.weight", rank * inner, inner)

    def take_rows(self, name, first, count):
        self.weights[name] = self.weights[name][first:first + count].contiguous()

    def take_columns(self, name, first, count):
        self.weights[name] = self.weights[name][:, first:first + count].contiguous()

    def attention(self, *args):
        out = super().attention(*args)  # [batch, n, hidden]: this rank's heads' share of o_proj
        dist.all_reduce(out)
        return out

    def mlp(self, *args):
        out = super().mlp(*args)  # [batch, n, hidden]: this rank's features' share of down_proj
        dist.all_reduce(out)
        return out


class RankCache:
    """One model's cache on this rank, and the rank's KV manager's rollback."""

    def __init__(self, model, role, books):
        self.model = model
        self.role = role
        self.books = books
        self.cache = DynamicCache()
        self.calls = 0

    def rows(self):
        return self.cache.get_seq_length()

    def feed(self, tokens, first_position):
        """Feeds tokens at the engine's positions first_position...; logits [n, vocab]."""
        positions = torch.arange(first_position, first_position + len(tokens))[None]
        with torch.no_grad():
            out = self.model(torch.tensor([tokens]), position_ids=positions, past_key_values=self.cache, use_cache=True)
        self.calls += 1
        return out.logits[0]

    def rollback(self, keep, cut):
        """Keeps the first `keep` rows where the engine's books say `keep`; `cut`
        is what this rank's manager actually keeps (the same unless a bug)."""
        before = self.rows()
        self.cache.crop(cut)
        if self.rows() != keep:
            self.books.depart(self.role, self.calls, cut=self.rows() < before)


class Books:
    """The rank's first departure from the engine's bookkeeping."""

    def __init__(self, rank):
        self.rank = rank
        self.departure = None

    def depart(self, role, call, cut):
        if self.departure is None:
            self.departure = {"rank": self.rank, "sequence": 0, "role": role, "call": call, "step": "between",
                              "kind": "crop" if cut else "none"}


def accepted_count(drafts, picks):
    n = 0
    while n < len(drafts) and drafts[n] == picks[n]:
        n += 1
    return n


def speculative(target, drafter, prompt, new_tokens, rank, gamma=4, bug=None, bug_rank=1):
    """Greedy speculative decoding on every rank; returns the committed ids."""
    buggy = bug is not None and rank == bug_rank
    x = list(prompt)
    end = len(x) + new_tokens
    target.feed(x[:-1], 0)
    drafter.feed(x[:-1], 0)
    drafter_held = len(x) - 1  # the engine's count of the drafter's rows: every rank feeds alike
    while len(x) < end:
        L = len(x)
        k = min(gamma, end - L - 1)
        logits = drafter.feed(x[drafter_held:], drafter_held)
        drafts = []
        for i in range(k):
            drafts.append(int(logits[-1].argmax()))
            if i < k - 1:
                logits = drafter.feed([drafts[-1]], L + i)
        picks = target.feed([x[L - 1]] + drafts, L - 1).argmax(-1).tolist()
        n = accepted_count(drafts, picks)
        x += drafts[:n] + [picks[n]]
        rejected = n < k
        keep = L + n  # every committed token but the last
        target.rollback(keep, keep + 1 if buggy and bug == "rank-keeps-rejected" and rejected else keep)
        drafter_held = min(L + max(k - 1, 0), keep)  # it fed x[L-1] and d_1 .. d_{k-1}
        drafter.rollback(drafter_held,
                         drafter.rows() if buggy and bug == "rank-drafter-not-cropped" and rejected else drafter_held)
    return x


def run_rank(rank, ranks, rendezvous, directory, models, prompt, new_tokens, bug, bug_rank):
    """One process of the run: joins the group, records its capture and writes its books."""
    import kvscope_capture
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=ranks)
    try:
        target_model = ShardedLlama(models[0], rank, ranks)
        drafter_model = ShardedLlama(models[1], rank, ranks)
        books = Books(rank)
        target, drafter = RankCache(target_model, "target", books), RankCache(drafter_model, "drafter", books)
        path = os.path.join(directory, f"rank{rank}.kvcapture")
        with kvscope_capture.Recorder(path, shard="torch.distributed") as rec:
            rec.watch(target_model, role="target")
            rec.watch(drafter_model, role="drafter")
            committed = speculative(target, drafter, prompt, new_tokens, rank, bug=bug, bug_rank=bug_rank)
            rec.commit(committed)
        with open(os.path.join(directory, f"rank{rank}.json"), "w") as f:
            json.dump({"committed": committed, "departure": books.departure}, f)
    finally:
        dist.destroy_process_group()
