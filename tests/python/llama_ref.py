"""A small Llama / Mistral reference model in plain PyTorch, called like a
Hugging Face causal LM: forward(input_ids, attention_mask=None,
position_ids=None, past_key_values=None, use_cache=True, cache_position=None)
returns an object with `.logits` [batch, n, vocab] and `.past_key_values`.

HF 4.43 semantics, eager attention, float32 (or the dtype given: weights,
activations and cache in it, norms computed in float32 as HF does); Qwen2's
q/k/v biases when the checkpoint has them:
* cache_position defaults to past length + arange(n); position_ids (RoPE)
  default to cache_position;
* the causal mask compares each key's index with the query's cache_position
  (key j is visible to query i iff j <= cache_position[i], and on a sliding
  window model j > cache_position[i] - W), except on a ring buffer, which is the
  window itself;
* an explicit 4-D attention_mask [batch or 1, 1, n, keys] (bool: True attends;
  float: additive) replaces the causal mask; a 2-D padding mask [batch, keys]
  (nonzero attends) is combined with it;
* a batch of B sequences: input_ids [B, n], position_ids [B or 1, n] (RoPE per
  sequence), caches [B, kv_heads, seq, head_dim];
* legacy tuple caches (and None) come back as new tuples, cache objects are
  updated in place and returned."""
import json
import os
from types import SimpleNamespace

import torch

from hf_caches import DynamicCache
from safetensors_io import read_tensors


class CausalLMOutput(SimpleNamespace):
    """logits [batch, n, vocab], past_key_values."""


def rms_norm(x, weight, eps):
    wide = x.float()
    variance = wide.pow(2).mean(-1, keepdim=True)
    return weight * (wide * torch.rsqrt(variance + eps)).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaRef(torch.nn.Module):
    def __init__(self, model_dir, dtype=torch.float32):
        super().__init__()
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = SimpleNamespace(**json.load(f))
        self.config.name_or_path = model_dir
        cfg = self.config
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.sliding_window = getattr(cfg, "sliding_window", None)
        # Hugging Face's from_pretrained default: float32, whatever the checkpoint stores (bf16 widens exactly).
        weights, _ = read_tensors(os.path.join(model_dir, "model.safetensors"))
        self.weights = {name: t.to(dtype) if t.is_floating_point() else t for name, t in weights.items()}
        self.inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))

    def get_input_embeddings(self):
        return SimpleNamespace(weight=self.weights["model.embed_tokens.weight"])

    def w(self, name):
        if name == "lm_head.weight" and name not in self.weights:  # tie_word_embeddings
            return self.weights["model.embed_tokens.weight"]
        return self.weights[name]

    def rotary(self, position_ids):
        """position_ids [batch or 1, n] -> cos, sin [batch or 1, 1, n, head_dim], in the weights' dtype."""
        freqs = position_ids.float()[:, :, None] * self.inv_freq[None, None, :]  # [batch, n, head_dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = self.w("model.embed_tokens.weight").dtype
        return emb.cos()[:, None].to(dtype), emb.sin()[:, None].to(dtype)

    def causal_mask(self, kind, n_keys, cache_position, padding=None):
        """Additive mask [1 or batch, 1, n, n_keys] from key indices vs
        cache_position, and a 2-D padding mask [batch, n_keys] when given."""
        keys = torch.arange(n_keys)[None, :]  # [1, n_keys]
        limit = cache_position[:, None]  # [n, 1]
        visible = keys <= limit
        if self.sliding_window and kind != "ring":
            visible &= keys > limit - self.sliding_window
        if padding is None:
            return self.additive(visible)
        padding = padding[:, :n_keys] != 0
        if padding.shape[1] < n_keys:  # keys past the mask's end: the causal mask alone decides (HF)
            padding = torch.cat([padding, padding.new_ones(padding.shape[0], n_keys - padding.shape[1])], 1)
        both = visible[None] & padding[:, None, :]  # [batch, n, n_keys]
        return self.additive(both)[:, None]

    @staticmethod
    def additive(visible):
        mask = torch.zeros(visible.shape, dtype=torch.float32)
        mask[~visible] = torch.finfo(torch.float32).min
        return mask[None, None] if mask.dim() == 2 else mask

    def attention(self, layer, x, cos, sin, cache, attention_mask, cache_position):
        cfg = self.config
        batch, n = x.shape[:2]
        prefix = f"model.layers.{layer}.self_attn."
        q = self.project(x, prefix + "q_proj").view(batch, n, -1, self.head_dim).transpose(1, 2)
        k = self.project(x, prefix + "k_proj").view(batch, n, -1, self.head_dim).transpose(1, 2)
        v = self.project(x, prefix + "v_proj").view(batch, n, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin  # [batch, heads, n, head_dim]
        k = k * cos + rotate_half(k) * sin  # [batch, kv_heads, n, head_dim]
        kind = "append"
        if cache is not None:
            kind = cache.attention_kind(layer)
            k, v = cache.update(k, v, layer, {"cache_position": cache_position})
            if kind == "ring" and k.shape[-2] > cache.sliding_window:
                kind = "append"  # a prefill longer than the ring attends to all of itself
        repeats = cfg.num_attention_heads // cfg.num_key_value_heads
        k = k.repeat_interleave(repeats, dim=1)  # [batch, heads, keys, head_dim]
        v = v.repeat_interleave(repeats, dim=1)
        scores = (q @ k.transpose(2, 3)) / (self.head_dim ** 0.5)  # [batch, heads, n, keys]
        if attention_mask is not None and attention_mask.dim() == 4:
            mask = self.additive(attention_mask.bool()) if attention_mask.dtype == torch.bool else attention_mask
        else:
            mask = self.causal_mask(kind, k.shape[-2], cache_position, attention_mask)
        probs = torch.softmax(scores + mask.to(scores.dtype), dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(batch, n, -1)
        return out @ self.w(prefix + "o_proj.weight").T

    def project(self, x, name):
        """x @ W.T, plus the bias where the checkpoint has one (Qwen2's q/k/v)."""
        out = x @ self.w(name + ".weight").T
        bias = self.weights.get(name + ".bias")
        return out if bias is None else out + bias

    def mlp(self, layer, x):
        prefix = f"model.layers.{layer}.mlp."
        gate = torch.nn.functional.silu(x @ self.w(prefix + "gate_proj.weight").T)
        return (gate * (x @ self.w(prefix + "up_proj.weight").T)) @ self.w(prefix + "down_proj.weight").T

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=True, cache_position=None, return_dict=True):
        cfg = self.config
        # HF 4.36-4.46: anything but a Cache object (tuples, or None) comes back as legacy tuples.
        legacy = past_key_values is None or isinstance(past_key_values, tuple)
        cache = DynamicCache.from_legacy_cache(past_key_values) if legacy else past_key_values
        if cache is None and use_cache:
            cache = DynamicCache()
        n = input_ids.shape[1]
        past = cache.get_seq_length() if cache is not None else 0
        if cache_position is None:
            cache_position = torch.arange(past, past + n)
        if position_ids is None:
            position_ids = cache_position[None]
        cos, sin = self.rotary(position_ids)
        if position_ids.dim() == 1:
            position_ids = position_ids[None]
        x = self.w("model.embed_tokens.weight")[input_ids]  # [batch, n, hidden]
        for layer in range(cfg.num_hidden_layers):
            h = rms_norm(x, self.w(f"model.layers.{layer}.input_layernorm.weight"), cfg.rms_norm_eps)
            x = x + self.attention(layer, h, cos, sin, cache, attention_mask, cache_position)
            h = rms_norm(x, self.w(f"model.layers.{layer}.post_attention_layernorm.weight"), cfg.rms_norm_eps)
            x = x + self.mlp(layer, h)
        x = rms_norm(x, self.w("model.norm.weight"), cfg.rms_norm_eps)
        logits = x @ self.w("lm_head.weight").T  # [batch, n, vocab]
        returned = cache.to_legacy_cache() if legacy and cache is not None else cache
        return CausalLMOutput(logits=logits, past_key_values=returned if use_cache else None)
