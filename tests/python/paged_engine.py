"""A paged speculative-decoding engine in plain PyTorch, written the way
vLLM-style engines are: per model and layer a block pool
[num_blocks, kv_heads, block_size, head_dim], a block table and a length per
sequence, one free list, and paged attention that gathers each sequence's
rows through its table. Weights and ops are llama_ref's (the bundled
target/drafter or the fixtures).

The model is called like vLLM's: input_ids [B, n] and position_ids [B, n],
plus the engine's own slot_mapping [B, n] (the pool slot each input's K/V
is written to, -1 for a pad), block_tables and context_lens (rows each
sequence attends before the call). The prefill is the prompts left-padded,
with the 2-D attention_mask [B, P] that tells the pads (vLLM writes a pad to
no slot either); later calls feed n real tokens per sequence.

Greedy speculative decoding with per-row acceptance, as batched_loops:
each round the drafter drafts gamma tokens ([B, 1] calls, gamma + 1 of
them), the target verifies [x[L-1], d1..d_gamma]; sequence b keeps
L_b + n_b rows in both pools and returns the blocks past them to the free
list (popped last-in first-out, as vLLM's free block queue hands out the
most recently freed block first).

Bugs (the target's rollback):
* `freed-block`: the rollback frees the blocks past keep // block_size
  (floor instead of ceiling): a partly kept last block goes back to the free
  list while the table still maps it; the next allocation hands it to a
  sequence that overwrites its rows.
* `length`: the rollback sets a sequence's length inside the branch that
  frees blocks: a sequence whose rollback frees none keeps its old length,
  its rejected drafts still attended.

The engine keeps its own books: per pool slot, the (sequence, position)
whose row it holds. After every call each sequence must attend exactly its
own rows 0 .. length - 1 (a forward departure otherwise), and after every
rollback hold every token of its sequence but the last (a between
departure otherwise); the first departure is recorded as batched_loops
does (sequence, role, call, operation)."""
import torch

import kvscope_capture
from batched_loops import BatchRun, accepted_count, left_padded, note_departure
from llama_ref import CausalLMOutput, LlamaRef, rms_norm, rotate_half

BUGS = ("freed-block", "length")
BLOCK_SIZE = 4


class PagedLlama(torch.nn.Module):
    """llama_ref's Llama over a paged cache: the pools are the engine's
    (PagedSide.key_pool / value_pool), passed in as `pools`."""

    def __init__(self, model_dir):
        super().__init__()
        self.ref = LlamaRef(model_dir)
        self.config = self.ref.config
        self.head_dim = self.ref.head_dim

    def get_input_embeddings(self):
        return self.ref.get_input_embeddings()

    def forward(self, input_ids, position_ids, slot_mapping, block_tables, context_lens, pools,
                attention_mask=None):
        cfg, ref = self.config, self.ref
        real = slot_mapping >= 0  # [B, n]
        cos, sin = ref.rotary(position_ids)
        x = ref.w("model.embed_tokens.weight")[input_ids]  # [B, n, hidden]
        for layer in range(cfg.num_hidden_layers):
            h = rms_norm(x, ref.w(f"model.layers.{layer}.input_layernorm.weight"), cfg.rms_norm_eps)
            x = x + self.attention(layer, h, cos, sin, slot_mapping, real, block_tables, context_lens, pools)
            h = rms_norm(x, ref.w(f"model.layers.{layer}.post_attention_layernorm.weight"), cfg.rms_norm_eps)
            x = x + ref.mlp(layer, h)
        x = rms_norm(x, ref.w("model.norm.weight"), cfg.rms_norm_eps)
        return CausalLMOutput(logits=x @ ref.w("lm_head.weight").T, past_key_values=None)  # [B, n, vocab]

    def attention(self, layer, x, cos, sin, slot_mapping, real, block_tables, context_lens, pools):
        cfg, ref = self.config, self.ref
        batch, n = x.shape[:2]
        prefix = f"model.layers.{layer}.self_attn."
        q = ref.project(x, prefix + "q_proj").view(batch, n, -1, self.head_dim).transpose(1, 2)
        k = ref.project(x, prefix + "k_proj").view(batch, n, -1, self.head_dim).transpose(1, 2)
        v = ref.project(x, prefix + "v_proj").view(batch, n, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin  # [B, heads, n, head_dim]
        k = k * cos + rotate_half(k) * sin  # [B, kv_heads, n, head_dim]
        key_pool, value_pool = pools[0][layer], pools[1][layer]  # [num_blocks, kv_heads, block_size, head_dim]
        write_to_pool(key_pool, k, slot_mapping)
        write_to_pool(value_pool, v, slot_mapping)
        out = x.new_zeros(batch, n, cfg.num_attention_heads * self.head_dim)
        repeats = cfg.num_attention_heads // cfg.num_key_value_heads
        for b in range(batch):
            inputs = real[b].nonzero()[:, 0]
            keys_count = context_lens[b] + len(inputs)
            keys = gather_rows(key_pool, block_tables[b], keys_count).repeat_interleave(repeats, 0)
            values = gather_rows(value_pool, block_tables[b], keys_count).repeat_interleave(repeats, 0)
            scores = q[b][:, inputs] @ keys.transpose(1, 2) / (self.head_dim ** 0.5)  # [heads, m, keys]
            visible = torch.arange(keys_count)[None, :] <= (context_lens[b] + torch.arange(len(inputs)))[:, None]
            scores = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
            rows = torch.softmax(scores, -1) @ values  # [heads, m, head_dim]
            out[b, inputs] = rows.transpose(0, 1).reshape(len(inputs), -1)
        return out @ ref.w(prefix + "o_proj.weight").T


def write_to_pool(pool, rows, slot_mapping):
    """rows [B, kv_heads, n, head_dim] -> pool [num_blocks, kv_heads, block_size, head_dim]
    at slot_mapping [B, n] (block * block_size + offset; -1: a pad, not written)."""
    block_size = pool.shape[2]
    for b in range(rows.shape[0]):
        for i, slot in enumerate(slot_mapping[b].tolist()):
            if slot >= 0:
                pool[slot // block_size, :, slot % block_size] = rows[b, :, i]


def gather_rows(pool, table, count):
    """The first `count` rows a block table maps, in logical order: [kv_heads, count, head_dim]."""
    block_size = pool.shape[2]
    blocks = pool[torch.tensor(table[:(count + block_size - 1) // block_size], dtype=torch.long)]
    rows = blocks.permute(1, 0, 2, 3).reshape(pool.shape[1], -1, pool.shape[3])  # [kv_heads, blocks * bs, hd]
    return rows[:, :count]


class BlockPool:
    """The free list of one model's pool."""

    def __init__(self, num_blocks):
        self.free = list(range(num_blocks - 1, -1, -1))  # popped from the end: block 0 first

    def allocate(self):
        if not self.free:
            raise RuntimeError("the block pool is exhausted")
        return self.free.pop()

    def release(self, blocks):
        self.free.extend(blocks)


class PagedSide:
    """One model's paged cache: pools per layer, a block table and a length per
    sequence, and the books (the owner of each pool slot's row)."""

    def __init__(self, model, role, run, batch, num_blocks=64, block_size=BLOCK_SIZE):
        cfg = model.config
        shape = (num_blocks, cfg.num_key_value_heads, block_size, model.head_dim)
        self.key_pool = [torch.zeros(shape) for _ in range(cfg.num_hidden_layers)]
        self.value_pool = [torch.zeros(shape) for _ in range(cfg.num_hidden_layers)]
        self.model, self.role, self.run = model, role, run
        self.block_size, self.num_blocks = block_size, num_blocks
        self.pool = BlockPool(num_blocks)
        self.tables = [[] for _ in range(batch)]
        self.lengths = [0] * batch
        self.owner = {}  # pool slot -> (sequence, position) of the row written there
        self.calls = 0

    def slot(self, b, position):
        return self.tables[b][position // self.block_size] * self.block_size + position % self.block_size

    def feed(self, inputs, real=None):
        """inputs [B][n]; real: bool [B, n] (False on a prefill's pads). Returns logits [B, n, vocab]."""
        batch, n = len(inputs), len(inputs[0])
        real = torch.ones(batch, n, dtype=torch.bool) if real is None else real
        context = list(self.lengths)
        positions, slots = [], []
        for b in range(batch):
            row_positions, row_slots, next_position = [], [], context[b]
            for i in range(n):
                if not real[b, i]:
                    row_positions.append(1)  # a pad (HF's convention); written nowhere
                    row_slots.append(-1)
                    continue
                while len(self.tables[b]) * self.block_size <= next_position:
                    self.tables[b].append(self.pool.allocate())
                row_positions.append(next_position)
                row_slots.append(self.slot(b, next_position))
                next_position += 1
            positions.append(row_positions)
            slots.append(row_slots)
        arguments = {"attention_mask": real.long()} if not bool(real.all()) else {}
        with torch.no_grad():
            out = self.model(torch.tensor(inputs), position_ids=torch.tensor(positions),
                             slot_mapping=torch.tensor(slots), block_tables=[list(t) for t in self.tables],
                             context_lens=context, pools=(self.key_pool, self.value_pool), **arguments)
        for b in range(batch):
            for position, slot in zip(positions[b], slots[b]):
                if slot >= 0:
                    self.owner[slot] = (b, position)
            self.lengths[b] += int(real[b].sum())
        self.check_books()
        self.calls += 1
        return out.logits

    def check_books(self):
        """After a forward each sequence attends exactly its own rows 0 .. length - 1
        (the first sequence that does not departs at this call)."""
        for b, length in enumerate(self.lengths):
            if any(self.owner.get(self.slot(b, i)) != (b, i) for i in range(length)):
                note_departure(self.run, self.role, b, self.calls, "forward")
                return

    def rollback(self, keep, bug=None):
        """Sequence b keeps its first keep[b] rows; whole blocks past them go back to the free list."""
        for b, kept in enumerate(keep):
            needed = (kept + self.block_size - 1) // self.block_size
            freed_from = kept // self.block_size if bug == "freed-block" else needed  # the bug: floor
            spare = self.tables[b][freed_from:]
            if spare:
                self.pool.release(reversed(spare))
                if bug == "length":
                    self.lengths[b] = kept  # the bug: the length is set only where blocks were freed
            del self.tables[b][needed:]
            if bug != "length":
                self.lengths[b] = kept

    def cache(self, module, arguments, output):
        """The engine's cache_reader for kvscope_capture: per sequence and layer the
        rows the call's block table maps (before the call: context_lens of them;
        after it: those plus the inputs written), with the blocks and the free list."""
        tables, lengths = arguments["block_tables"], list(arguments["context_lens"])
        if output is not None:
            lengths = [length + int((row >= 0).sum()) for length, row in zip(lengths, arguments["slot_mapping"])]
        sequences = []
        for b, length in enumerate(lengths):
            blocks = [tables[b][i // self.block_size] for i in range(length)]
            layers = [kvscope_capture.PagedLayer(gather_rows(self.key_pool[layer], tables[b], length),
                                                 gather_rows(self.value_pool[layer], tables[b], length),
                                                 blocks=blocks)
                      for layer in range(len(self.key_pool))]
            sequences.append(kvscope_capture.PagedSequence(layers))
        return kvscope_capture.PagedCache(sequences, block_size=self.block_size, num_blocks=self.num_blocks,
                                          free_blocks=list(self.pool.free))


def paged_speculative(target_model, drafter_model, prompts, new_tokens, gamma=4, bug=None, recorder=None):
    """Greedy speculative decoding of B prompts over paged caches; runs rounds
    until every sequence has at least new_tokens new tokens. recorder: a
    kvscope_capture.Recorder to watch both models with the engine's readers."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; one of {', '.join(BUGS)}")
    batch = len(prompts)
    run = BatchRun([list(prompt) for prompt in prompts])
    target = PagedSide(target_model, "target", run, batch)
    drafter = PagedSide(drafter_model, "drafter", run, batch)
    if recorder is not None:
        recorder.watch(target_model, role="target", cache_reader=target.cache)
        recorder.watch(drafter_model, role="drafter", cache_reader=drafter.cache)
    ids, real = left_padded([prompt[:-1] for prompt in prompts])
    target.feed(ids, real)
    drafter.feed(ids, real)
    x = run.sequences
    ends = [len(prompt) + new_tokens for prompt in prompts]
    while any(len(x[b]) < ends[b] for b in range(batch)):
        lengths = [len(sequence) for sequence in x]
        drafts = [[] for _ in range(batch)]
        logits = drafter.feed([[sequence[-1]] for sequence in x])
        for _ in range(gamma):
            for b in range(batch):
                drafts[b].append(int(logits[b, -1].argmax()))
            logits = drafter.feed([[row[-1]] for row in drafts])  # the last call writes d_gamma's row
        picks = target.feed([[x[b][-1]] + drafts[b] for b in range(batch)]).argmax(-1).tolist()
        accepted = [accepted_count(drafts[b], picks[b]) for b in range(batch)]
        run.accepted.append(accepted)
        for b in range(batch):
            x[b] += drafts[b][:accepted[b]] + [picks[b][accepted[b]]]
        keep = [lengths[b] + accepted[b] for b in range(batch)]  # L_b + n_b rows: all of x_b but its last token
        for side in (target, drafter):
            side.rollback(keep, bug if side is target else None)
            wrong = [b for b in range(batch) if side.lengths[b] != len(x[b]) - 1]
            if wrong:  # the rollback left a sequence with other rows than its tokens but the last
                note_departure(run, side.role, wrong[0], side.calls, "between")
    return run
