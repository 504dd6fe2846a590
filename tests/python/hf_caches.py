"""Small stand-ins for Hugging Face transformers' KV caches, in the shapes the
recorder must read (transformers is not installed here). Tensors are
[batch=1, kv_heads, seq, head_dim] like HF's; the method names and the
semantics (update, get_seq_length, crop, reset) follow HF.

Each class tells the reference model how to mask its keys (`attention_kind`):
"append" (keys are the cached rows then the inputs), "static" (a fixed buffer
indexed by cache_position) or "ring" (a sliding-window ring buffer)."""
import torch


def legacy_to_layers(past):
    """Legacy tuples ((k, v), ...) -> lists of keys and values."""
    return [k for k, _ in past], [v for _, v in past]


class DynamicCache:
    """transformers 4.36-4.53 DynamicCache: key_cache / value_cache lists, one
    [1, kv_heads, seq, head_dim] tensor per layer, grown with torch.cat."""

    def __init__(self):
        self.key_cache = []
        self.value_cache = []
        self._seen_tokens = 0

    def attention_kind(self, layer_idx):
        return "append"

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        if layer_idx == 0:
            self._seen_tokens += key_states.shape[-2]
        if len(self.key_cache) <= layer_idx:
            self.key_cache.append(key_states)
            self.value_cache.append(value_states)
        else:
            self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)
            self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], value_states], dim=-2)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]

    def get_seq_length(self, layer_idx=0):
        return 0 if len(self.key_cache) <= layer_idx else self.key_cache[layer_idx].shape[-2]

    def crop(self, max_length):
        """HF semantics: a negative max_length removes that many rows from the end."""
        if max_length < 0:
            max_length = self.get_seq_length() - abs(max_length)
        if self.get_seq_length() <= max_length:
            return
        self._seen_tokens = max_length
        for idx in range(len(self.key_cache)):
            self.key_cache[idx] = self.key_cache[idx][..., :max_length, :]
            self.value_cache[idx] = self.value_cache[idx][..., :max_length, :]

    def to_legacy_cache(self):
        return tuple((k, v) for k, v in zip(self.key_cache, self.value_cache))

    @classmethod
    def from_legacy_cache(cls, past):
        cache = cls()
        if past is not None:
            cache.key_cache, cache.value_cache = legacy_to_layers(past)
            cache._seen_tokens = cache.get_seq_length()
        return cache


class DynamicLayer:
    """One layer of transformers 4.54+'s cache: `keys` / `values` are None until
    the first update."""

    def __init__(self):
        self.keys = None
        self.values = None

    def update(self, key_states, value_states):
        if self.keys is None:
            self.keys, self.values = key_states, value_states
        else:
            self.keys = torch.cat([self.keys, key_states], dim=-2)
            self.values = torch.cat([self.values, value_states], dim=-2)
        return self.keys, self.values

    def get_seq_length(self):
        return 0 if self.keys is None else self.keys.shape[-2]

    def crop(self, max_length):
        if self.keys is not None and self.keys.shape[-2] > max_length:
            self.keys = self.keys[..., :max_length, :]
            self.values = self.values[..., :max_length, :]


class LayeredDynamicCache:
    """transformers 4.54+ DynamicCache: `cache.layers[i].keys / .values`."""

    def __init__(self, num_layers):
        self.layers = [DynamicLayer() for _ in range(num_layers)]

    def attention_kind(self, layer_idx):
        return "append"

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        return self.layers[layer_idx].update(key_states, value_states)

    def get_seq_length(self, layer_idx=0):
        return self.layers[layer_idx].get_seq_length()

    def crop(self, max_length):
        if max_length < 0:
            max_length = self.get_seq_length() - abs(max_length)
        for layer in self.layers:
            layer.crop(max_length)


class StaticCache:
    """transformers StaticCache: zero buffers [1, kv_heads, max_cache_len, head_dim]
    written in place at cache_position; the model masks slots past each query's
    cache_position, so rows beyond the engine's length are never attended."""

    def __init__(self, num_layers, kv_heads, head_dim, max_cache_len, dtype=torch.float32):
        shape = (1, kv_heads, max_cache_len, head_dim)
        self.max_cache_len = max_cache_len
        self.key_cache = [torch.zeros(shape, dtype=dtype) for _ in range(num_layers)]
        self.value_cache = [torch.zeros(shape, dtype=dtype) for _ in range(num_layers)]

    def attention_kind(self, layer_idx):
        return "static"

    def update(self, key_states, value_states, layer_idx, cache_kwargs):
        cache_position = cache_kwargs["cache_position"]
        self.key_cache[layer_idx].index_copy_(2, cache_position, key_states)
        self.value_cache[layer_idx].index_copy_(2, cache_position, value_states)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]

    def get_seq_length(self, layer_idx=0):
        """HF's estimate: slots of head 0 holding anything but zeros."""
        return int(self.key_cache[layer_idx][0, 0].any(dim=-1).sum())

    def reset(self):
        for k, v in zip(self.key_cache, self.value_cache):
            k.zero_()
            v.zero_()


class SlidingWindowCache(StaticCache):
    """transformers 4.43 SlidingWindowCache: every layer keeps a ring of
    `sliding_window` slots. The ring rolls (every slot moves one to the left, the
    oldest row goes to the last slot and is overwritten) before a token lands on
    the last slot. `roll_early=True` is stock 4.43, which rolls when a token lands
    ON the last slot, dropping position 0 while it is still inside the window
    (transformers #37574); False is the fix (#38046): roll only once full."""

    def __init__(self, num_layers, kv_heads, head_dim, sliding_window, roll_early=False, dtype=torch.float32):
        super().__init__(num_layers, kv_heads, head_dim, sliding_window, dtype)
        self.sliding_window = sliding_window
        self.roll_early = roll_early

    def attention_kind(self, layer_idx):
        return "ring"

    def update(self, key_states, value_states, layer_idx, cache_kwargs):
        cache_position = cache_kwargs["cache_position"]
        window = self.sliding_window
        if cache_position.shape[0] > window:
            # A prefill longer than the ring: keep its last `window` rows, attend to all of it.
            self.key_cache[layer_idx].copy_(key_states[:, :, -window:])
            self.value_cache[layer_idx].copy_(value_states[:, :, -window:])
            return key_states, value_states
        if cache_position.shape[0] > 1 and int(cache_position[-1]) >= window - 1:
            raise ValueError("this ring buffer takes several tokens only in a prefill that fits the window")
        last = int(cache_position[-1])
        roll = last >= window - 1 if self.roll_early else last > window - 1
        slots = cache_position.clamp(0, window - 1)
        for cache, states in ((self.key_cache, key_states), (self.value_cache, value_states)):
            buffer = cache[layer_idx]
            if roll:
                buffer.copy_(torch.roll(buffer, shifts=-1, dims=2))
            buffer[:, :, slots] = states
        return self.key_cache[layer_idx], self.value_cache[layer_idx]
