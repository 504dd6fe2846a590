"""reference="self": the recorder computes, in the engine's own process and
device, what each call's logits should be: the watched module run without a
cache over the context the call's rows claim (every position up to the
call's last input, each holding the token last fed there), followed by the
call's inputs. `kvscope-cli check` compares the engine's logits with it when
it has no model of the family (docs/capture-format-v3.md): a model too large
to replay on the checking machine, or an architecture kvscope does not
implement, still gets its cached forward checked against an uncached one.

Cost: one uncached forward of the whole context per call (quadratic in the
run's length), and full-vocabulary float32 rows per call in the file."""
import inspect

import torch


class SelfReference:
    """The tokens each sequence's rows claim, per watched role."""

    def __init__(self, batch):
        self.claimed = [dict() for _ in range(batch)]  # per sequence: position -> the token last fed there

    def feed(self, ids, positions, real):
        """ids, positions [B][n]; real: bool [B][n] (False on pads)."""
        for b, (row, at) in enumerate(zip(ids, positions)):
            for i, (token, position) in enumerate(zip(row, at)):
                if real[b][i]:
                    self.claimed[b][position] = token

    def context(self, sequence, last_position):
        """The claimed tokens at positions 0 .. last_position, or None when one was never fed."""
        claimed = self.claimed[sequence]
        if any(p not in claimed for p in range(last_position + 1)):
            return None
        return [claimed[p] for p in range(last_position + 1)]


def real_inputs(mask, batch, count):
    """bool [B][n]: the inputs that are tokens of their sequence, not pads. A
    2-D padding mask's last n keys are the call's inputs."""
    if mask is None or mask[0] != "padding" or mask[1].shape[-1] < count:
        return [[True] * count for _ in range(batch)]
    return mask[1][:, -count:].tolist()


def uncached_logits(forward, context, device):
    """The module's logits [len(context), vocab] for `context` fed at once, with no cache."""
    parameters = inspect.signature(forward).parameters
    kwargs = {}
    if "use_cache" in parameters:
        kwargs["use_cache"] = False
    if "past_key_values" in parameters:
        kwargs["past_key_values"] = None
    output = forward(torch.tensor([context], device=device), **kwargs)
    logits = output.logits if hasattr(output, "logits") else output[0]
    return logits[0].float().cpu()


def reference_rows(reference, forward, ids, positions, real, rows, device):
    """[B, rows, vocab] float32: per sequence the uncached logits at the
    positions of the call's last `rows` inputs (zeros for a pad); None when a
    sequence's context has a position never fed (then no reference is made)."""
    batch, count = len(ids), len(ids[0])
    out = None
    for b in range(batch):
        wanted = [positions[b][i] for i in range(count - rows, count)]
        kept = [p for i, p in zip(range(count - rows, count), wanted) if real[b][i]]
        if not kept:
            continue
        context = reference.context(b, max(kept))
        if context is None:
            return None
        logits = uncached_logits(forward, context, device)  # [len(context), vocab]
        if out is None:
            out = torch.zeros(batch, rows, logits.shape[-1])
        for r, i in enumerate(range(count - rows, count)):
            if real[b][i]:
                out[b, r] = logits[positions[b][i]]
    return out
