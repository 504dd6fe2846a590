"""Recurrent state of hybrid models (docs/capture-format-v3.md, "Recurrent state").

A hybrid model (Mamba-attention, gated-delta) keeps, beside its attention
layers' rows, per recurrent layer a causal conv1d state and an SSM state. Such
a state cannot be cut like rows: an engine that verifies drafts must snapshot
it and restore it (or keep one state per input and pick the accepted one).

The recorder reads the states before and after each call through a
state_reader, fn(module, arguments, output) -> RecurrentStates or None (output
None before the call), or, built in, from a cache shaped like transformers'
HybridMambaAttentionDynamicCache (`conv_states` / `ssm_states` lists per
layer, [batch, ...] each; an empty tensor for an attention layer).

Each state gets an identity from its bits (fingerprint -> id per role, layer
and kind), stored once, and a provenance the calls give it: the call that fed
positions p..p+n-1 from state s produced the state "after position p+n-1"
from s (and, when the reader gives per-input intermediate states, input i's
"after position p+i")."""
import hashlib
from dataclasses import dataclass, field
from typing import Dict

import torch

from .cache_views import output_cache
from .errors import CaptureError

KINDS = ("conv", "ssm")


@dataclass
class RecurrentStates:
    """states[(layer, kind)]: [batch, ...] the state after the inputs so far;
    intermediate[(layer, kind)]: [batch, n, ...] the state after each input of
    the call just run (optional: engines that roll back without recompute)."""
    states: Dict[tuple, torch.Tensor]
    intermediate: Dict[tuple, torch.Tensor] = field(default_factory=dict)


def read_hybrid_cache(cache):
    """A cache with conv_states / ssm_states lists (HybridMambaAttentionDynamicCache's
    layout) -> RecurrentStates, or None for a cache without them."""
    if cache is None or not (hasattr(cache, "conv_states") and hasattr(cache, "ssm_states")):
        return None
    states, intermediate = {}, {}
    for kind, name in (("conv", "conv_states"), ("ssm", "ssm_states")):
        for layer, tensor in enumerate(getattr(cache, name)):
            if isinstance(tensor, torch.Tensor) and tensor.numel() > 0:
                states[(layer, kind)] = tensor
        per_input = getattr(cache, f"intermediate_{name}", None) or []
        for layer, tensor in enumerate(per_input):
            if isinstance(tensor, torch.Tensor) and tensor.numel() > 0:
                intermediate[(layer, kind)] = tensor
    return RecurrentStates(states, intermediate)


def fingerprint(tensor):
    """The state's bits: equal states, equal fingerprints."""
    data = tensor.detach().to("cpu").contiguous()
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str((tuple(data.shape), str(data.dtype))).encode())
    digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


class StateRegistry:
    """One role's states: id per fingerprint per (layer, kind), and each id's provenance."""

    def __init__(self):
        self.ids = {}          # (layer, kind, fingerprint) -> id
        self.provenance = []   # per id: {"id", "layer", "kind", "call", "input", "from", "after_position"}

    def identify(self, layer, kind, tensor):
        """-> (id, new)."""
        key = (layer, kind, fingerprint(tensor))
        if key in self.ids:
            return self.ids[key], False
        self.ids[key] = len(self.provenance)
        self.provenance.append({"id": len(self.provenance), "layer": layer, "kind": kind,
                                "call": None, "input": None, "from": None, "after_position": None})
        return self.ids[key], True

    def produced(self, state_id, call, input_index, source, after_position):
        """Provenance for a state a call computed; a state seen before keeps its first one."""
        entry = self.provenance[state_id]
        if entry["call"] is None and entry["from"] is None and entry["after_position"] is None:
            entry.update({"call": call, "input": input_index, "from": source, "after_position": after_position})


class RecurrentRecorder:
    """The recurrent part of the recorder: per role a StateRegistry, per call the ids."""

    def __init__(self):
        self.registries = {}  # role -> StateRegistry
        self.used = False

    def read(self, reader, module, arguments, output):
        if reader is not None:
            states = reader(module, arguments, output)
        else:
            cache = arguments.get("past_key_values") if output is None else output_cache(output)
            states = read_hybrid_cache(cache)
        if states is not None and not isinstance(states, RecurrentStates):
            raise CaptureError(f"state_reader returned {type(states).__name__}, expected RecurrentStates or None")
        return states

    def ids_of(self, role, states, batch):
        """-> per sequence, a list of {"layer", "kind", "id"}, sorted by layer then kind."""
        registry = self.registries.setdefault(role, StateRegistry())
        out = [[] for _ in range(batch)]
        for (layer, kind), tensor in sorted(states.states.items()):
            check_state(layer, kind, tensor, batch)
            for b in range(batch):
                state_id, _ = registry.identify(layer, kind, tensor[b])
                out[b].append({"layer": layer, "kind": kind, "id": state_id})
        return out

    def call_json(self, role, call_index, before_ids, after, positions, batch):
        """Registers the states a call produced and returns the call's `recurrent`
        field. before_ids: ids_of() the states before the call, read before it ran
        (an engine updates its states in place); positions: [batch][n] the positions fed."""
        if before_ids is None and after is None:
            return None
        self.used = True
        registry = self.registries.setdefault(role, StateRegistry())
        after_ids = self.ids_of(role, after, batch) if after is not None else None
        source = {(b, e["layer"], e["kind"]): e["id"] for b, seq in enumerate(before_ids or []) for e in seq}
        for b, sequence in enumerate(after_ids or []):
            last = positions[b][-1] if positions[b] else None
            for entry in sequence:
                registry.produced(entry["id"], call_index, len(positions[b]) - 1,
                                  source.get((b, entry["layer"], entry["kind"])), last)
        out = {"before": before_ids, "after": after_ids}
        if after is not None and after.intermediate:
            out["intermediate"] = self.intermediate_json(registry, call_index, after, source, positions, batch)
        return out

    def intermediate_json(self, registry, call_index, after, source, positions, batch):
        """Per sequence, [{"layer", "kind", "ids": one per input}]."""
        out = [[] for _ in range(batch)]
        for (layer, kind), tensor in sorted(after.intermediate.items()):
            if tensor.dim() < 2 or tensor.shape[0] != batch or tensor.shape[1] != len(positions[0]):
                raise CaptureError(f"layer {layer} {kind}: intermediate states of shape {list(tensor.shape)}, "
                                   f"expected [{batch}, {len(positions[0])}, ...]")
            for b in range(batch):
                ids = []
                for i in range(tensor.shape[1]):
                    state_id, _ = registry.identify(layer, kind, tensor[b, i])
                    registry.produced(state_id, call_index, i, source.get((b, layer, kind)), positions[b][i])
                    ids.append(state_id)
                out[b].append({"layer": layer, "kind": kind, "ids": ids})
        return out

    def manifest_json(self):
        """The manifest's `recurrent_states`: per role, each state's provenance."""
        return {role: registry.provenance for role, registry in self.registries.items()}


def check_state(layer, kind, tensor, batch):
    if kind not in KINDS:
        raise CaptureError(f"layer {layer}: recurrent state kind {kind!r}, expected one of {KINDS}")
    if not isinstance(tensor, torch.Tensor) or tensor.dim() < 2 or tensor.shape[0] != batch:
        shape = list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise CaptureError(f"layer {layer} {kind} state: {shape}, expected [{batch}, ...]")


