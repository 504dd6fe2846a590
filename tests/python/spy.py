"""A module that calls a reference model and keeps, for every call, copies of
what the recorder should have seen: inputs, the cache before and after, the
logits. The tests watch the spy, so both see the very same calls."""
import torch


def snapshot(past):
    """Any test cache -> per layer (keys, values) [kv_heads, slots, head_dim] copies, or None per absent layer."""
    if past is None:
        return None
    if isinstance(past, tuple):
        pairs = list(past)
    elif hasattr(past, "layers"):
        pairs = [(layer.keys, layer.values) for layer in past.layers]
    else:
        pairs = list(zip(past.key_cache, past.value_cache))
    return [None if k is None else (k[0].clone(), v[0].clone()) for k, v in pairs]


class Spy(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.head_dim = inner.head_dim
        self.log = []

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, input_ids, **kwargs):
        before = snapshot(kwargs.get("past_key_values"))
        out = self.inner(input_ids, **kwargs)
        self.log.append({"input_ids": input_ids[0].tolist(), "before": before,
                         "after": snapshot(out.past_key_values), "logits": out.logits[0].clone()})
        return out
