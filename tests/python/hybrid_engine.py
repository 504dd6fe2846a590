"""A small hybrid causal LM and a speculative loop over it, in plain PyTorch,
written the way engines for Mamba-attention / gated-delta hybrids
(Qwen3-Next, Jamba) are: layers alternate a recurrent mixer (a causal conv1d
of kernel 4 over the mixer's input channels, then a per-head SSM state
h <- exp(-dt * A) h + dt * x B^T, read out through C) and attention. The
weights are seeded random; model_type "kvscope_toy_hybrid" is one kvscope
does not implement, so `check` judges the run from its bookkeeping alone.

The cache is laid out as transformers' HybridMambaAttentionDynamicCache:
key_cache / value_cache lists (an attention layer's [1, heads, rows,
head_dim], an empty [1, 0] placeholder for a recurrent layer) beside
conv_states [1, conv_dim, kernel] / ssm_states [1, heads, head_dim, state]
lists. A verify call may keep the state after each of its inputs
(intermediate_conv_states / intermediate_ssm_states, [1, n, ...]), as
engines do that roll back without recomputing.

Speculative loop (greedy, batch 1): the drafter (the same family with
perturbed weights, run without a cache) drafts K tokens; the target verifies
[pending, d1..dK] keeping per-input states, accepts a drafts, then rolls
back: the attention rows are cropped to the accepted prefix and the
recurrent states are set to the state after the last accepted input
(per-input state a). Bugs in that rollback:
* `not-restored`: the rows are cropped, the recurrent states kept: they hold
  the rejected drafts.
* `shifted-snapshot`: the state picked is input a + 1's (shifted by r = 1).
* `conv-not-restored`: the SSM state is picked, the conv state kept.

The loop keeps its own books: after each rollback, per recurrent layer and
kind, the position after which the state it set was computed; the next target
call must resume from the state after the position before its first input.
The first departure is recorded as (sequence, role, call, operation, layer,
state kind)."""
import math
from dataclasses import dataclass

import torch

BUGS = ("not-restored", "shifted-snapshot", "conv-not-restored")
KERNEL = 4
LAYER_TYPES = ("recurrent", "attention", "recurrent", "attention")
KINDS = ("conv", "ssm")


@dataclass
class HybridConfig:
    model_type: str = "kvscope_toy_hybrid"
    vocab_size: int = 96
    hidden_size: int = 32
    num_hidden_layers: int = 4
    num_attention_heads: int = 2
    num_key_value_heads: int = 2
    head_dim: int = 16
    ssm_heads: int = 4
    ssm_head_dim: int = 8
    ssm_state: int = 8
    name_or_path: str = "toy-hybrid"


@dataclass
class Output:
    logits: torch.Tensor
    past_key_values: object


class HybridMambaAttentionDynamicCache:
    """transformers' layout (see the module doc); `intermediate_*` only after a
    call that kept its per-input states."""

    def __init__(self, config, batch=1):
        empty = lambda: torch.zeros(batch, 0)  # noqa: E731 - transformers' [[]] * batch placeholder
        conv_dim = config.ssm_heads * config.ssm_head_dim
        self.key_cache, self.value_cache, self.conv_states, self.ssm_states = [], [], [], []
        for kind in LAYER_TYPES:
            attention = kind == "attention"
            shape = (batch, config.num_key_value_heads, 0, config.head_dim)
            self.key_cache.append(torch.zeros(shape) if attention else empty())
            self.value_cache.append(torch.zeros(shape) if attention else empty())
            self.conv_states.append(empty() if attention else torch.zeros(batch, conv_dim, KERNEL))
            self.ssm_states.append(empty() if attention else
                                   torch.zeros(batch, config.ssm_heads, config.ssm_head_dim, config.ssm_state))
        self.intermediate_conv_states = None
        self.intermediate_ssm_states = None

    def get_seq_length(self):
        return int(self.key_cache[LAYER_TYPES.index("attention")].shape[2])

    def crop(self, length):
        for layer, kind in enumerate(LAYER_TYPES):
            if kind == "attention":
                self.key_cache[layer] = self.key_cache[layer][:, :, :length].clone()
                self.value_cache[layer] = self.value_cache[layer][:, :, :length].clone()

    def set_state(self, layer, kind, tensor):
        states = self.conv_states if kind == "conv" else self.ssm_states
        states[layer] = tensor.clone()


class Mixer(torch.nn.Module):
    """Mamba-2-style recurrent mixer with a causal conv1d (kernel 4) and a per-head SSM state."""

    def __init__(self, config):
        super().__init__()
        self.heads, self.head_dim, self.state = config.ssm_heads, config.ssm_head_dim, config.ssm_state
        inner = self.heads * self.head_dim
        self.in_proj = torch.nn.Linear(config.hidden_size, 2 * inner + 2 * self.state + self.heads, bias=False)
        self.conv = torch.nn.Parameter(torch.randn(inner, KERNEL) / KERNEL)
        self.A = torch.nn.Parameter(torch.rand(self.heads) + 0.5)
        self.D = torch.nn.Parameter(torch.randn(self.heads))
        self.out_proj = torch.nn.Linear(inner, config.hidden_size, bias=False)

    def forward(self, hidden, conv_state, ssm_state):
        """hidden [1, n, hidden]; conv_state [1, inner, K]; ssm_state [1, heads, head_dim, state].
        -> output [1, n, hidden], per-input conv states [1, n, inner, K], ssm states [1, n, heads, head_dim, state]."""
        inner = self.heads * self.head_dim
        x, z, B, C, dt = self.in_proj(hidden).split([inner, inner, self.state, self.state, self.heads], dim=-1)
        convs, ssms, outputs = [], [], []
        for t in range(hidden.shape[1]):
            conv_state = torch.cat([conv_state[:, :, 1:], x[:, t, :, None]], dim=-1)  # [1, inner, K]
            u = torch.nn.functional.silu((conv_state * self.conv).sum(-1))  # [1, inner]
            u = u.view(1, self.heads, self.head_dim)
            step = torch.nn.functional.softplus(dt[:, t])  # [1, heads]
            decay = torch.exp(-step * self.A)[:, :, None, None]
            ssm_state = decay * ssm_state + (step[:, :, None, None] * u[..., None]) * B[:, t][:, None, None, :]
            y = (ssm_state * C[:, t][:, None, None, :]).sum(-1) + self.D[None, :, None] * u  # [1, heads, head_dim]
            outputs.append(y.reshape(1, inner) * torch.nn.functional.silu(z[:, t]))
            convs.append(conv_state)
            ssms.append(ssm_state)
        return self.out_proj(torch.stack(outputs, 1)), torch.stack(convs, 1), torch.stack(ssms, 1)


class Attention(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.qkv = torch.nn.Linear(config.hidden_size, 3 * self.heads * self.head_dim, bias=False)
        self.out = torch.nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)

    def forward(self, hidden, past_keys, past_values):
        """hidden [1, n, hidden]; past [1, heads, rows, head_dim] -> output, keys, values (rows + n)."""
        n = hidden.shape[1]
        q, k, v = self.qkv(hidden).view(1, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        keys, values = torch.cat([past_keys, k], 2), torch.cat([past_values, v], 2)
        past = past_keys.shape[2]
        scores = q @ keys.transpose(-1, -2) / math.sqrt(self.head_dim)  # [1, heads, n, rows + n]
        allowed = torch.arange(past + n)[None, :] <= (past + torch.arange(n))[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
        output = (scores.softmax(-1) @ values).transpose(1, 2).reshape(1, n, -1)
        return self.out(output), keys, values


class HybridLM(torch.nn.Module):
    def __init__(self, config=None, seed=0):
        super().__init__()
        self.config = config or HybridConfig()
        torch.manual_seed(seed)
        self.embed_tokens = torch.nn.Embedding(self.config.vocab_size, self.config.hidden_size)
        self.layers = torch.nn.ModuleList(Mixer(self.config) if kind == "recurrent" else Attention(self.config)
                                          for kind in LAYER_TYPES)
        self.lm_head = torch.nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=False)

    def get_input_embeddings(self):
        return self.embed_tokens

    def forward(self, input_ids, position_ids=None, past_key_values=None, keep_intermediate=False):
        """input_ids [1, n]; position_ids are accepted as HF models take them (the
        mixers carry the order). A fresh cache when past_key_values is None."""
        cache = past_key_values if past_key_values is not None else HybridMambaAttentionDynamicCache(self.config)
        hidden = self.embed_tokens(input_ids)
        cache.intermediate_conv_states = [torch.zeros(1, 0) for _ in LAYER_TYPES] if keep_intermediate else None
        cache.intermediate_ssm_states = [torch.zeros(1, 0) for _ in LAYER_TYPES] if keep_intermediate else None
        for layer, block in enumerate(self.layers):
            normed = torch.nn.functional.layer_norm(hidden, hidden.shape[-1:])
            if LAYER_TYPES[layer] == "recurrent":
                out, convs, ssms = block(normed, cache.conv_states[layer], cache.ssm_states[layer])
                cache.conv_states[layer], cache.ssm_states[layer] = convs[:, -1].clone(), ssms[:, -1].clone()
                if keep_intermediate:
                    cache.intermediate_conv_states[layer], cache.intermediate_ssm_states[layer] = convs, ssms
            else:
                out, cache.key_cache[layer], cache.value_cache[layer] = block(
                    normed, cache.key_cache[layer], cache.value_cache[layer])
            hidden = hidden + out
        logits = self.lm_head(torch.nn.functional.layer_norm(hidden, hidden.shape[-1:]))
        return Output(logits, cache)


def drafter_of(target, noise, seed=1):
    """The same family with perturbed weights: it agrees with the target often, not always."""
    drafter = HybridLM(target.config, seed=0)
    drafter.load_state_dict(target.state_dict())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in drafter.parameters():
            parameter.add_(noise * parameter.std() * torch.randn(parameter.shape, generator=generator))
    return drafter


@torch.no_grad()
def greedy(model, prompt, new_tokens):
    """Decoding without speculation: prefill, then one token per call."""
    tokens = list(prompt)
    out = model(torch.tensor([tokens]), position_ids=torch.arange(len(tokens))[None])
    cache = out.past_key_values
    while len(tokens) < len(prompt) + new_tokens:
        tokens.append(int(out.logits[0, -1].argmax()))
        position = len(tokens) - 1
        out = model(torch.tensor([[tokens[-1]]]), position_ids=torch.tensor([[position]]), past_key_values=cache)
    return tokens


@torch.no_grad()
def draft(drafter, tokens, k):
    """k greedy drafts, the drafter recomputing its whole context each time (no cache)."""
    context = list(tokens)
    for _ in range(k):
        context.append(int(drafter(torch.tensor([context])).logits[0, -1].argmax()))
    return context[len(tokens):]


def rollback_index(bug, accepted, k):
    """Which per-input state (0 .. k) the rollback sets, per kind: input `accepted`'s is right."""
    if bug == "not-restored":
        return {"conv": k, "ssm": k}
    if bug == "shifted-snapshot":
        shifted = min(accepted + 1, k)  # shifted by r = 1
        return {"conv": shifted, "ssm": shifted}
    if bug == "conv-not-restored":
        return {"conv": k, "ssm": accepted}
    return {"conv": accepted, "ssm": accepted}


@torch.no_grad()
def speculative(target, drafter, prompt, new_tokens, k=4, bug=None, recorder=None):
    """-> (tokens, departure or None). Target calls are counted as the recorder counts them."""
    if bug not in (None,) + BUGS:
        raise ValueError(f"bug must be one of {BUGS} or None, not {bug!r}")
    tokens = list(prompt)
    out = target(torch.tensor([tokens]), position_ids=torch.arange(len(tokens))[None])
    cache, calls = out.past_key_values, 1
    tokens.append(int(out.logits[0, -1].argmax()))
    # The books: per (layer, kind), the position after which the state the loop set was computed.
    books = {(layer, kind): len(prompt) - 1 for layer, t in enumerate(LAYER_TYPES) if t == "recurrent"
             for kind in KINDS}
    departure = None
    while len(tokens) < len(prompt) + new_tokens:
        pending = len(tokens) - 1  # the position of the last token, not yet fed
        if departure is None:
            departure = first_wrong_state(books, pending - 1, calls)
        drafts = draft(drafter, tokens, k)
        fed = [tokens[-1]] + drafts
        out = target(torch.tensor([fed]), position_ids=torch.arange(pending, pending + k + 1)[None],
                     past_key_values=cache, keep_intermediate=True)
        calls += 1
        predicted = out.logits[0].argmax(-1).tolist()  # row i predicts position pending + i + 1
        accepted = 0
        while accepted < k and drafts[accepted] == predicted[accepted]:
            accepted += 1
        tokens += drafts[:accepted] + [predicted[accepted]]
        cache.crop(pending + accepted + 1)
        picks = rollback_index(bug, accepted, k)
        for layer, kind in books:
            per_input = (cache.intermediate_conv_states if kind == "conv" else cache.intermediate_ssm_states)[layer]
            cache.set_state(layer, kind, per_input[:, picks[kind]])
            books[(layer, kind)] = pending + picks[kind]
    tokens = tokens[:len(prompt) + new_tokens]
    if recorder is not None:
        recorder.commit(tokens)
    return tokens, departure


def first_wrong_state(books, required_after, call):
    """The loop's own verdict before target call `call`: the first (layer, kind)
    whose state is not the one after `required_after`."""
    for (layer, kind) in sorted(books, key=lambda key: (key[0], KINDS.index(key[1]))):
        if books[(layer, kind)] != required_after:
            return {"sequence": 0, "role": "target", "call": call, "operation": "restore",
                    "layer": layer, "state": kind, "state_after": books[(layer, kind)],
                    "required_after": required_after}
    return None
