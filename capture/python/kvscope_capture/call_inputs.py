"""What a forward call was given, read from its arguments with HF semantics:
the input ids, the positions RoPE used, cache_position and the attention mask."""
import inspect

import torch

from .cache_views import past_length
from .errors import CaptureError


def bind_arguments(signature, args, kwargs):
    """Positional and keyword arguments -> a dict by parameter name."""
    if signature is None:
        if args:
            return {"input_ids": args[0], **kwargs}
        return dict(kwargs)
    bound = signature.bind_partial(*args, **kwargs)
    arguments = dict(bound.arguments)
    for name, parameter in signature.parameters.items():
        if parameter.kind == inspect.Parameter.VAR_KEYWORD and name in arguments:
            arguments.update(arguments.pop(name))
        elif parameter.kind == inspect.Parameter.VAR_POSITIONAL and name in arguments:
            # forward(self, *args, **kwargs), as a wrapper passing through: the
            # first positional argument is the token ids, as without a signature.
            passed = arguments.pop(name)
            if passed and "input_ids" not in arguments:
                arguments["input_ids"] = passed[0]
    return arguments


def forward_signature(forward):
    try:
        return inspect.signature(forward)
    except (TypeError, ValueError):
        return None


def token_ids(arguments):
    """input_ids [B, n] (or [n]) -> B lists of n ints, one per sequence."""
    ids = arguments.get("input_ids")
    if ids is None:
        if arguments.get("inputs_embeds") is not None:
            raise CaptureError("the call has no input_ids (inputs_embeds alone cannot be checked)")
        raise CaptureError("the call has no input_ids: pass the token ids as input_ids= or as the first positional "
                           "argument")
    ids = torch.as_tensor(ids)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.dim() != 2 or ids.shape[0] < 1:
        raise CaptureError(f"input_ids of shape {list(ids.shape)}: expected [batch, n]")
    return ids.tolist()


def one_row(value, name, count):
    """[1, n] or [n] -> list of n ints."""
    value = torch.as_tensor(value)
    if value.dim() == 2 and value.shape[0] == 1:
        value = value[0]
    if value.dim() != 1 or value.shape[0] != count:
        raise CaptureError(f"{name} of shape {list(value.shape)} for {count} input tokens")
    return [int(v) for v in value.tolist()]


def batch_rows(value, name, count, batch):
    """[batch, n], [1, n] or [n] -> batch lists of n ints (one row stands for every sequence)."""
    value = torch.as_tensor(value)
    if value.dim() == 2 and value.shape[0] == batch and value.shape[1] == count:
        return [[int(v) for v in row] for row in value.tolist()]
    row = one_row(value, name, count)
    return [list(row) for _ in range(batch)]


def positions(arguments, count, batch=1):
    """(positions per sequence [batch][n], source, cache_position or None), as
    HF computes them: position_ids if passed, else cache_position if passed (one
    for the whole batch), else past length + arange(count). Must run before the
    forward (the cache grows in place). A padding attention_mask does not move
    them: HF models rotate at position_ids, which generate() derives from the
    mask and passes."""
    cache_position = arguments.get("cache_position")
    cache_position = None if cache_position is None else one_row(cache_position, "cache_position", count)
    position_ids = arguments.get("position_ids")
    if position_ids is not None:
        return batch_rows(position_ids, "position_ids", count, batch), "position_ids", cache_position
    if cache_position is not None:
        return [list(cache_position) for _ in range(batch)], "cache_position", cache_position
    start = past_length(arguments.get("past_key_values"))
    return [list(range(start, start + count)) for _ in range(batch)], "past_length", None


def mask_allowed(mask):
    """A mask tensor -> bool (True where attention is allowed). Bool and integer
    masks keep nonzero entries; float masks are HF's additive form (0 keeps,
    a large negative value masks)."""
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        return mask > torch.finfo(mask.dtype).min / 2
    return mask != 0


def attention_mask(arguments, count, batch=1):
    """None (no mask, or a 2-D mask that keeps every key: the model's own causal
    mask applies), ("padding", bool [batch, keys]) for a 2-D mask with masked keys,
    or ("explicit", bool [n, keys] for batch 1, [batch, n, keys] above) for a 4-D
    mask that replaces the causal mask."""
    mask = arguments.get("attention_mask")
    if mask is None:
        return None
    mask = torch.as_tensor(mask)
    if mask.dim() == 2:
        if mask.shape[0] != batch:
            raise CaptureError(f"attention_mask of shape {list(mask.shape)} for a batch of {batch}")
        allowed = mask_allowed(mask)
        return None if bool(allowed.all()) else ("padding", allowed.clone())
    if mask.dim() == 4:
        if mask.shape[0] not in (1, batch) or mask.shape[1] != 1 or mask.shape[2] != count:
            raise CaptureError(f"attention_mask of shape {list(mask.shape)} for {count} inputs: "
                               f"expected [{batch}, 1, {count}, keys]")
        allowed = mask_allowed(mask[:, 0])  # [1 or batch, n, keys]
        if batch == 1:
            return "explicit", allowed[0].clone()
        return "explicit", allowed.expand(batch, -1, -1).clone()
    raise CaptureError(f"attention_mask of shape {list(mask.shape)}: expected 2-D or 4-D")
