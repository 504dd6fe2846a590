"""Reads whatever `past_key_values` an engine passes or gets back, without
importing transformers (duck typing on the attribute names of every version
from 4.36 on), as one `CacheView`: per layer the physical slots' keys and
values [kv_heads, slots, head_dim] of one sequence of the batch and the
layer's kind:

  "append"  slots are rows in the order written; a call's rows are appended
            (legacy tuples, DynamicCache 4.36-4.53, 4.54+ dynamic layers)
  "static"  a fixed buffer written in place at cache_position (StaticCache,
            HybridCache's global layers, 4.54+ StaticLayer)
  "ring"    a fixed sliding-window buffer that is rolled (SlidingWindowCache,
            HybridCache's sliding layers, 4.54+ SlidingWindowLayer)
"""
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from .errors import CaptureError


@dataclass
class CacheView:
    class_name: str
    cache_object: object                # the cache object; None for tuples (rebuilt every call)
    raw_keys: List[Optional[torch.Tensor]]  # per layer the cache's own [1, kv_heads, slots, head_dim] tensor,
    raw_values: List[Optional[torch.Tensor]]  # None for a layer never written
    kinds: List[str] = field(default_factory=list)

    def keys(self, layer):
        """[kv_heads, slots, head_dim]."""
        return batch_one(self.raw_keys[layer], f"layer {layer} keys")

    def values(self, layer):
        return batch_one(self.raw_values[layer], f"layer {layer} values")

    def batch_size(self):
        """The batch of the first layer that holds tensors, or None."""
        for tensor in self.raw_keys:
            if isinstance(tensor, torch.Tensor) and tensor.dim() == 4:
                return int(tensor.shape[0])
        return None

    def sequence_keys(self, layer, sequence, batch):
        """Sequence `sequence` of a [batch, kv_heads, slots, head_dim] layer:
        [kv_heads, slots, head_dim]."""
        return batch_row(self.raw_keys[layer], f"layer {layer} keys", sequence, batch)

    def sequence_values(self, layer, sequence, batch):
        return batch_row(self.raw_values[layer], f"layer {layer} values", sequence, batch)


def batch_one(tensor, what):
    """[1, kv_heads, slots, head_dim] -> [kv_heads, slots, head_dim]."""
    if tensor is None:
        return None
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4:
        raise CaptureError(f"{what}: expected a [batch, kv_heads, seq, head_dim] tensor, got {describe(tensor)}")
    if tensor.shape[0] != 1:
        raise CaptureError(f"{what}: batch size {tensor.shape[0]}; the recorder supports batch size 1 only")
    return tensor[0]


def batch_row(tensor, what, sequence, batch):
    """[batch, kv_heads, slots, head_dim] -> row `sequence`, [kv_heads, slots, head_dim]."""
    if tensor is None:
        return None
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4:
        raise CaptureError(f"{what}: expected a [batch, kv_heads, seq, head_dim] tensor, got {describe(tensor)}")
    if tensor.shape[0] != batch:
        raise CaptureError(f"{what}: batch size {tensor.shape[0]} in a run of {batch} sequences")
    return tensor[sequence]


def describe(value):
    if isinstance(value, torch.Tensor):
        return f"tensor {list(value.shape)} {value.dtype}"
    return type(value).__name__


def fixed_kind(name):
    """The kind of a fixed-buffer cache or layer class, from its name."""
    return "ring" if "Sliding" in name or "Window" in name else "static"


def layer_kind(layer):
    name = type(layer).__name__
    if "Dynamic" in name or not ("Static" in name or "Sliding" in name):
        return "append"
    return fixed_kind(name)


def read_legacy(past):
    for index, pair in enumerate(past):
        if not isinstance(pair, (tuple, list)) or len(pair) < 2:
            raise CaptureError(f"past_key_values[{index}] is {describe(pair)}, expected a (key, value) pair")
    keys, values = [pair[0] for pair in past], [pair[1] for pair in past]
    return CacheView("tuple", None, keys, values, ["append"] * len(keys))


def read_layered(cache):
    """transformers 4.54+: cache.layers[i].keys / .values."""
    keys = [getattr(layer, "keys", None) for layer in cache.layers]
    values = [getattr(layer, "values", None) for layer in cache.layers]
    kinds = [layer_kind(layer) for layer in cache.layers]
    return CacheView(type(cache).__name__, cache, keys, values, kinds)


def read_key_value_lists(cache):
    """transformers 4.36-4.53: cache.key_cache / cache.value_cache lists."""
    name = type(cache).__name__
    if hasattr(cache, "_quantized_key_cache"):
        raise CaptureError(f"{name}: quantized caches are not supported (their rows are not in key_cache)")
    keys = [attention_rows(tensor) for tensor in cache.key_cache]
    values = [attention_rows(tensor) for tensor in cache.value_cache]
    kinds = [list_layer_kind(cache, layer, tensor) for layer, tensor in enumerate(keys)]
    return CacheView(name, cache, keys, values, kinds)


def attention_rows(tensor):
    """A layer's key or value tensor, or None for a layer that holds no attention
    rows: a hybrid model's recurrent layer keeps an empty placeholder there
    ([batch, 0], as transformers' HybridMambaAttentionDynamicCache does)."""
    if isinstance(tensor, torch.Tensor) and tensor.dim() != 4 and tensor.numel() == 0:
        return None
    return tensor


def list_layer_kind(cache, layer, tensor):
    """A key_cache layer's kind from the cache's layout, never its class name:
    per-layer `is_sliding` flags (HybridCache), else a buffer as long as the
    cache's `sliding_window` is a ring, one as long as its `max_cache_len` a
    static buffer, anything else grows by appending."""
    sliding = getattr(cache, "is_sliding", None)
    if sliding is not None and layer < len(sliding):
        return "ring" if sliding[layer] else "static"
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4:
        return "append"
    slots = int(tensor.shape[2])
    window = getattr(cache, "sliding_window", None)
    if isinstance(window, int) and slots == window and getattr(cache, "max_cache_len", None) is not None:
        return "ring"
    max_length = getattr(cache, "max_cache_len", None)
    if isinstance(max_length, int) and slots == max_length:
        return "static"
    return "append"


def read_cache(past):
    """past_key_values of any supported shape -> CacheView, or None for no cache."""
    if past is None:
        return None
    if isinstance(past, (tuple, list)):
        return read_legacy(past)
    if hasattr(past, "self_attention_cache"):
        raise CaptureError(f"{type(past).__name__}: encoder-decoder caches are not supported")
    if hasattr(past, "layers") and all(hasattr(layer, "keys") for layer in past.layers):
        return read_layered(past)
    if hasattr(past, "key_cache") and hasattr(past, "value_cache"):
        return read_key_value_lists(past)
    raise CaptureError(f"past_key_values of type {type(past).__name__} is not a cache the recorder knows "
                       "(legacy tuples, DynamicCache, StaticCache, SlidingWindowCache, HybridCache, "
                       "or a cache with .layers[i].keys)")


def past_length(past):
    """The past length HF derives cache_position from when none is passed:
    get_seq_length() of a cache object, the keys' length for legacy tuples."""
    if past is None:
        return 0
    if isinstance(past, (tuple, list)):
        return int(past[0][0].shape[-2]) if len(past) else 0
    if hasattr(past, "get_seq_length"):
        return int(past.get_seq_length())
    raise CaptureError(f"{type(past).__name__} has no get_seq_length(): cannot derive positions")


def output_cache(output):
    """The cache a forward returned: .past_key_values, the dict's, or a tuple's second item; None."""
    if hasattr(output, "past_key_values"):
        return output.past_key_values
    if isinstance(output, dict):
        return output.get("past_key_values")
    if isinstance(output, (tuple, list)) and len(output) > 1:
        return output[1]
    return None
