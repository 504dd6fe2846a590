"""The Recorder: wraps each watched module's forward, records every call's
inputs, cache states and logits, and writes one .kvcapture file on exit."""
import functools
import json
import platform
import sys
import warnings

import torch

from . import version
from .between import describe_change
from .cache_views import read_cache
from .call_inputs import attention_mask, bind_arguments, forward_signature, positions, token_ids
from .errors import CaptureError
from .model_info import describe_model
from .row_registry import Fingerprinter, LayerRows, LayerState, TensorSource, assign_ids
from .safetensors_writer import write_safetensors

ROLES = ("target", "drafter")


def parse_logits_mode(logits):
    if logits == "full":
        return {"mode": "full"}
    if isinstance(logits, (tuple, list)) and len(logits) == 2 and logits[0] == "top_k" \
            and isinstance(logits[1], int) and logits[1] >= 1:
        return {"mode": "top_k", "k": logits[1]}
    raise ValueError(f"logits must be 'full' or ('top_k', k) with k >= 1, not {logits!r}")


def default_engine_name():
    name = f"python {platform.python_version()}, torch {torch.__version__}"
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        name += f", transformers {getattr(transformers, '__version__', '?')}"
    return name


class WatchedRole:
    """One watched module and what the recorder knows of its cache so far."""

    def __init__(self, role, module):
        self.role = role
        self.module = module
        self.had_own_forward = "forward" in module.__dict__
        self.original_forward = module.forward
        self.signature = forward_signature(self.original_forward)
        self.model = describe_model(module)
        self.num_layers = self.model["config"]["num_hidden_layers"]
        self.layers = []             # LayerRows per layer, grown on demand
        self.calls = 0
        self.last_after = None       # LayerState per layer after the previous call
        self.last_after_ids = None   # the same as row id lists
        self.last_after_object = None  # held until the next call, so `is` cannot match a recycled id

    def layer_rows(self, layer):
        while len(self.layers) <= layer:
            self.layers.append(LayerRows(len(self.layers)))
        return self.layers[layer]

    def restore(self):
        if self.had_own_forward:
            self.module.forward = self.original_forward
        else:
            del self.module.forward


class Recorder:
    """with Recorder("run.kvcapture", logits="full" | ("top_k", k)) as rec: ..."""

    def __init__(self, path, logits="full", engine=None):
        self.path = str(path)
        self.logits_mode = parse_logits_mode(logits)
        self.engine = engine or default_engine_name()
        self.roles = {}
        self.calls = []
        self.tensors = {}
        self.committed = None
        self.error = None
        self.closed = False
        self.in_call = False
        self.fingerprinter = Fingerprinter()
        self.bytes_written = None

    # --- the user's API --------------------------------------------------

    def __enter__(self):
        return self

    def watch(self, module, role="target"):
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        if role in self.roles:
            raise ValueError(f"a module is already watched as {role!r}")
        if any(watched.module is module for watched in self.roles.values()):
            raise ValueError("this module is already watched under another role")
        watched = WatchedRole(role, module)
        self.roles[role] = watched
        module.forward = self.wrapped_forward(watched)
        return module

    def commit(self, token_ids):
        """The final token ids, prompt included: a list, a [n] or [1, n] tensor,
        or a generate() output with .sequences."""
        sequences = getattr(token_ids, "sequences", token_ids)
        ids = torch.as_tensor(sequences)
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.dim() != 1:
            raise ValueError(f"commit() takes one sequence of token ids, got shape {list(ids.shape)}")
        self.committed = [int(token) for token in ids.tolist()]

    def __exit__(self, exc_type, exc, traceback):
        for watched in self.roles.values():
            watched.restore()
        self.closed = True
        if self.error is not None:
            if exc_type is None:
                raise CaptureError(f"no capture written to {self.path}: {self.error}")
            return False
        with torch.no_grad():
            self.bytes_written = self.write(complete=exc_type is None)
        return False

    # --- recording -------------------------------------------------------

    def wrapped_forward(self, watched):
        original = watched.original_forward

        # functools.wraps keeps the original signature visible: generate() inspects
        # forward's parameters to decide which arguments to pass.
        @functools.wraps(original)
        def forward(*args, **kwargs):
            if self.error is not None or self.closed or self.in_call:
                return original(*args, **kwargs)
            self.in_call = True
            try:
                pending = self.guarded(watched, lambda: self.before_call(watched, args, kwargs))
                output = original(*args, **kwargs)
                if pending is not None:
                    self.guarded(watched, lambda: self.after_call(watched, pending, output))
                return output
            finally:
                self.in_call = False

        return forward

    def guarded(self, watched, step):
        """Runs a recorder step; a failure stops recording and never reaches the engine."""
        try:
            with torch.no_grad():
                return step()
        except Exception as error:  # noqa: BLE001 - any recorder failure must stay out of the engine's run
            self.error = f"{watched.role} call {watched.calls}: {error}"
            warnings.warn(f"kvscope_capture stopped recording: {self.error}", RuntimeWarning, stacklevel=3)
            return None

    def before_call(self, watched, args, kwargs):
        arguments = bind_arguments(watched.signature, args, kwargs)
        ids = token_ids(arguments)
        rope_positions, source, cache_position = positions(arguments, len(ids))
        view = read_cache(arguments.get("past_key_values"))
        before = self.state_ids(watched, view, watched.last_after or [])
        before_json, before_ids = self.state_json(view, before)
        between = None
        if watched.calls > 0:
            same_object = view is not None and view.cache_object is not None \
                and view.cache_object is watched.last_after_object
            between = describe_change(watched.last_after_ids, before_ids, same_object)
        call = {"role": watched.role, "index": watched.calls, "input_ids": ids, "positions": rope_positions,
                "positions_source": source, "cache_position": cache_position, "attention_mask": None,
                "before": before_json, "between": between, "after": None, "logits": None}
        return call, attention_mask(arguments, len(ids)), before

    def after_call(self, watched, pending, output):
        call, mask, before = pending
        view = read_cache(output_cache(output))
        after = self.state_ids(watched, view, before or [])
        call["after"], after_ids = self.state_json(view, after)
        prefix = f"{watched.role}.call{watched.calls}"
        if mask is not None:
            call["attention_mask"] = self.mask_json(prefix, mask, call, before, after)
        call["logits"] = self.logits_json(prefix, output_logits(output), len(call["input_ids"]))
        watched.last_after, watched.last_after_ids = after, after_ids
        watched.last_after_object = view.cache_object if view else None
        watched.calls += 1
        self.calls.append(call)

    def state_ids(self, watched, view, reference):
        """CacheView -> LayerState per layer, registering rows never seen; None for no cache."""
        if view is None:
            return None
        layers = len(view.raw_keys)
        if watched.num_layers is None:
            watched.num_layers = layers
        if layers > watched.num_layers:
            raise CaptureError(f"the cache has {layers} layers, the model {watched.num_layers}")
        state = []
        for layer in range(watched.num_layers):
            if layer >= layers or view.raw_keys[layer] is None:
                state.append(LayerState.empty())
                continue
            previous = reference[layer] if layer < len(reference) else LayerState.empty()
            source = TensorSource(view.raw_keys[layer], view.raw_values[layer])
            kept = previous.source.kept_slots(*source.tensors) if previous.source is not None else None
            if kept is not None:  # the previous state's tensors, or a prefix of them, not written since
                state.append(previous.prefix(kept, source))
                continue
            keys, values = view.keys(layer).detach().cpu(), view.values(layer).detach().cpu()
            if keys.shape[1] != values.shape[1]:
                raise CaptureError(f"layer {layer}: {keys.shape[1]} key slots but {values.shape[1]} value slots")
            layer_state = assign_ids(watched.layer_rows(layer), self.fingerprinter, keys, values,
                                     view.kinds[layer], previous)
            layer_state.source = source
            state.append(layer_state)
        return state

    def state_json(self, view, state):
        """-> {"cache", "kinds", "layers": runs per layer} and the id lists per layer."""
        if view is None:
            return None, None
        kinds = list(view.kinds) + ["append"] * (len(state) - len(view.kinds))
        id_lists = [layer.id_list() for layer in state]
        return {"cache": view.class_name, "kinds": kinds, "layers": [layer.runs() for layer in state]}, id_lists

    def mask_json(self, prefix, mask, call, before, after):
        kind, allowed = mask
        if after is not None:
            widths = {len(layer.ids) for layer in after}
        else:
            widths = {(len(before[0].ids) if before else 0) + len(call["input_ids"])}
        if len(widths) != 1 or allowed.shape[1] not in widths:
            raise CaptureError(f"attention_mask covers {allowed.shape[1]} keys; the cache's slots after the call: "
                               f"{sorted(widths)}")
        name = f"{prefix}.attention_mask"
        self.tensors[name] = allowed.to(torch.bool).contiguous()
        return {"kind": kind, "tensor": name}

    def logits_json(self, prefix, logits, inputs):
        if logits is None:
            return None
        logits = torch.as_tensor(logits).detach()
        if logits.dim() != 3 or logits.shape[0] != 1 or logits.shape[1] > inputs:
            raise CaptureError(f"logits of shape {list(logits.shape)} for {inputs} inputs: expected [1, rows <= {inputs}, vocab]")
        rows = logits[0].float().cpu()  # [rows, vocab]
        if self.logits_mode["mode"] == "full":
            self.tensors[f"{prefix}.logits"] = rows.clone()
            return {"rows": rows.shape[0], "tensors": {"logits": f"{prefix}.logits"}}
        k = min(self.logits_mode["k"], rows.shape[1])
        values, ids = rows.topk(k, dim=-1)
        self.tensors[f"{prefix}.top_ids"] = ids.to(torch.int32)
        self.tensors[f"{prefix}.top_values"] = values.contiguous()
        self.tensors[f"{prefix}.lse"] = torch.logsumexp(rows.double(), dim=-1).float()
        return {"rows": rows.shape[0], "tensors": {"top_ids": f"{prefix}.top_ids",
                                                    "top_values": f"{prefix}.top_values", "lse": f"{prefix}.lse"}}

    # --- the file ----------------------------------------------------------

    def row_tensors(self):
        tensors = {}
        for role, watched in self.roles.items():
            config = watched.model["config"]
            for layer in range(watched.num_layers or 0):
                rows = watched.layers[layer] if layer < len(watched.layers) else None
                if rows is not None and rows.stored() is not None:
                    keys, values = rows.stored()
                else:
                    shape = (config["num_key_value_heads"] or 1, 0, config["head_dim"] or 1)
                    keys = values = torch.zeros(shape, dtype=torch.float32)
                tensors[f"{role}.layer{layer}.keys"] = keys
                tensors[f"{role}.layer{layer}.values"] = values
        return tensors

    def manifest(self, complete):
        models = {}
        for role, watched in self.roles.items():
            models[role] = dict(watched.model, layers=watched.num_layers or 0, calls=watched.calls)
        return {"format": version.FORMAT_NAME, "version": version.FORMAT_VERSION,
                "engine": {"name": self.engine, "recorder": f"kvscope_capture {version.__version__}"},
                "complete": complete, "logits": self.logits_mode, "models": models,
                "calls": self.calls, "committed": self.committed}

    def write(self, complete):
        tensors = self.row_tensors()
        tensors.update(self.tensors)
        metadata = {"format": version.FORMAT_NAME, "version": str(version.FORMAT_VERSION),
                    "kvscope_capture": json.dumps(self.manifest(complete), separators=(",", ":"))}
        return write_safetensors(self.path, tensors, metadata)


def output_logits(output):
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)) and output:
        return output[0]
    if isinstance(output, dict):
        return output.get("logits")
    return None


def output_cache(output):
    if hasattr(output, "past_key_values"):
        return output.past_key_values
    if isinstance(output, dict):
        return output.get("past_key_values")
    if isinstance(output, (tuple, list)) and len(output) > 1:
        return output[1]
    return None
