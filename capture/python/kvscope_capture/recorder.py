"""The Recorder: wraps each watched module's forward, records every call's
inputs, cache states and logits, and writes one .kvcapture file on exit.

A run's calls carry one batch of B sequences throughout (input_ids [B, n]).
B = 1 is written as format version 1, exactly as before batches existed; B > 1
as version 2, where every per-call field holds one entry per sequence
(docs/capture-format-v2.md). A tensor-parallel rank's capture (shard=...) is
version 3: version 2's layout, whatever B, plus the rank's `shard`
(docs/capture-format-v3.md). A paged engine's cache is read through its own
cache_reader (paged.py); its block ids make the file version 3 too."""
import functools
import json
import platform
import sys
import warnings

import torch

from . import version
from .between import describe_change
from .cache_views import output_cache, read_cache
from .call_inputs import attention_mask, bind_arguments, forward_signature, positions, token_ids
from .errors import CaptureError
from .model_info import describe_model
from .paged import PagedView, read_paged  # paged pools: an engine's cache_reader
from .recurrent import RecurrentRecorder  # hybrid models' recurrent states (recurrent.py)
from .row_registry import PADDING, Fingerprinter, LayerRows, LayerState, TensorSource, assign_ids
from .safetensors_writer import write_safetensors
from .self_reference import SelfReference, real_inputs, reference_rows
from .shard import parse_shard

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

    def __init__(self, role, module, cache_reader=None, state_reader=None):
        self.role = role
        self.state_reader = state_reader  # recurrent states (recurrent.py): fn(module, arguments, output) -> RecurrentStates
        self.cache_reader = cache_reader  # paged pools (paged.py): fn(module, arguments, output) -> PagedCache, or None
        self.module = module
        self.had_own_forward = "forward" in module.__dict__
        self.original_forward = module.forward
        self.signature = forward_signature(self.original_forward)
        self.model = describe_model(module)
        self.num_layers = self.model["config"]["num_hidden_layers"]
        self.layers = []             # LayerRows per layer, grown on demand
        self.calls = 0
        self.last_after = None       # per sequence, LayerState per layer after the previous call
        self.last_after_ids = None   # the same as row id lists [sequence][layer]
        self.last_after_object = None  # held until the next call, so `is` cannot match a recycled id
        self.self_reference = None   # SelfReference, with the recorder's reference="self"

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
    """with Recorder("run.kvcapture", logits="full" | ("top_k", k)) as rec: ...
    shard: this process's rank of a tensor-parallel run (shard.py), or None.
    reference: None, or "self": also record each call's logits computed without
    a cache over the context its rows claim (self_reference.py)."""

    def __init__(self, path, logits="full", engine=None, shard=None, reference=None):
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
        self.batch = None  # the run's batch size, set by its first call
        self.shard = parse_shard(shard)
        if reference not in (None, "self"):
            raise ValueError(f"reference must be None or 'self', not {reference!r}")
        self.reference = reference
        self.paged_blocks = False  # a state held a paged engine's blocks: format version 3 (paged.py)
        self.recurrent = RecurrentRecorder()  # recurrent states seen: format version 3 (recurrent.py)

    # --- the user's API --------------------------------------------------

    def __enter__(self):
        return self

    def watch(self, module, role="target", cache_reader=None, state_reader=None):
        """cache_reader: for an engine whose cache is no past_key_values (a paged
        block pool), fn(module, arguments, output) -> paged.PagedCache, called before
        (output None) and after each watched call (paged.py, docs/engine-captures.md).
        state_reader: a hybrid model's recurrent states, fn(module, arguments, output)
        -> recurrent.RecurrentStates or None; without one, a past_key_values with
        conv_states / ssm_states lists is read (recurrent.py)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        if role in self.roles:
            raise ValueError(f"a module is already watched as {role!r}")
        if any(watched.module is module for watched in self.roles.values()):
            raise ValueError("this module is already watched under another role")
        if cache_reader is not None and not callable(cache_reader):
            raise ValueError("cache_reader must be callable: fn(module, arguments, output) -> PagedCache or None")
        if state_reader is not None and not callable(state_reader):
            raise ValueError("state_reader must be callable: fn(module, arguments, output) -> RecurrentStates or None")
        watched = WatchedRole(role, module, cache_reader, state_reader)
        if self.shard is not None:
            self.shard.resolve(role, watched.model["config"]["num_key_value_heads"])
        self.roles[role] = watched
        module.forward = self.wrapped_forward(watched)
        return module

    def commit(self, token_ids):
        """The final token ids, prompt included: one sequence (a list, a [n] or
        [1, n] tensor, a generate() output with .sequences) for a batch of 1, or
        one list (or [n] tensor) per sequence for a batch of B, without padding."""
        sequences = getattr(token_ids, "sequences", token_ids)
        if isinstance(sequences, (list, tuple)) and sequences and all(is_sequence(item) for item in sequences):
            rows = [one_sequence(item, f"commit() sequence {b}") for b, item in enumerate(sequences)]
        else:
            ids = torch.as_tensor(sequences)
            if ids.dim() == 2 and ids.shape[0] == 1:
                ids = ids[0]
            if ids.dim() != 1:
                raise ValueError(f"commit() takes one list of token ids per sequence (no padding), got a tensor of "
                                 f"shape {list(ids.shape)}")
            rows = [[int(token) for token in ids.tolist()]]
        if self.batch is not None and len(rows) != self.batch:
            raise ValueError(f"commit() got {len(rows)} sequence(s) but the run's calls hold {self.batch}")
        self.committed = rows

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

    def set_batch(self, batch):
        if self.batch is None:
            if self.committed is not None and len(self.committed) != batch:
                raise CaptureError(f"commit() got {len(self.committed)} sequence(s) but the run's calls hold {batch}")
            self.batch = batch
        elif batch != self.batch:
            raise CaptureError(f"batch size {batch} after calls of batch size {self.batch}: a capture holds one "
                               "batch of sequences throughout")

    def before_call(self, watched, args, kwargs):
        arguments = bind_arguments(watched.signature, args, kwargs)
        ids = token_ids(arguments)  # [batch][n]
        self.set_batch(len(ids))
        count = len(ids[0])
        rope_positions, source, cache_position = positions(arguments, count, self.batch)
        recurrent_before = self.recurrent_before(watched, arguments)
        mask = attention_mask(arguments, count, self.batch)
        view = self.read_view(watched, arguments, None)
        before = self.state_ids(watched, view, watched.last_after, self.padding_of(mask, view))
        before_json, before_ids = self.state_json(view, before)
        between = None
        if watched.calls > 0:
            same_object = view is not None and view.cache_object is not None \
                and view.cache_object is watched.last_after_object
            between = self.between(watched.last_after_ids, before_ids, same_object)
        one = not self.batched_layout()  # version 1: the call's fields hold the single sequence's values
        call = {"role": watched.role, "index": watched.calls, "input_ids": ids[0] if one else ids,
                "positions": rope_positions[0] if one else rope_positions,
                "positions_source": source, "cache_position": cache_position, "attention_mask": None,
                "before": before_json, "between": between, "after": None, "logits": None}
        return call, mask, (before, recurrent_before), count, (ids, rope_positions, arguments)

    def recurrent_before(self, watched, arguments):
        """The recurrent states' ids before the call, read now: the call updates
        them in place. Their first sight makes the file version 3 (recurrent.py)."""
        states = self.recurrent.read(watched.state_reader, watched.module, arguments, None)
        if states is None:
            return None
        if not self.recurrent.used and self.calls and not self.batched_layout():
            raise CaptureError("recurrent states appeared after calls without them of a batch of 1 "
                               "(recorded in version 1's layout)")
        self.recurrent.used = True  # version 3 from here on
        return self.recurrent.ids_of(watched.role, states, self.batch)

    def first_recurrent_call(self, call):
        """The run's first call made recurrent states (a prefill from no cache):
        the file is version 3 from here on, so this call's fields written so far
        in version 1's layout take version 3's (one entry per sequence)."""
        if self.calls and not self.batched_layout():
            raise CaptureError("recurrent states appeared after calls without them of a batch of 1 "
                               "(recorded in version 1's layout)")
        was_batched = self.batched_layout()
        self.recurrent.used = True
        if was_batched:
            return
        call["input_ids"], call["positions"] = [call["input_ids"]], [call["positions"]]
        if call["before"] is not None:
            call["before"]["layers"] = [[runs] for runs in call["before"]["layers"]]

    def read_view(self, watched, arguments, output):
        """The cache before (output None) or after the call: the engine's
        cache_reader's (a PagedView), else past_key_values'."""
        if watched.cache_reader is not None:
            view = read_paged(watched.cache_reader, watched.module, arguments, output, self.batch)
            if view is not None and view.pool_slots is not None and not self.paged_blocks:
                if self.calls and not self.batched_layout():
                    raise CaptureError("cache_reader gave blocks after calls without them of a batch of 1 "
                                       "(recorded in version 1's layout)")
                self.paged_blocks = True  # version 3 from here on (paged.py)
            return view
        return read_cache(arguments.get("past_key_values") if output is None else output_cache(output))

    def padding_of(self, mask, view=None):
        """bool [batch, keys], True where a batched call's 2-D mask masks a slot;
        None for batch 1 (version 1 records masked slots as rows) or no such mask.
        A paged view's padding is its own: the front slots of the shorter sequences."""
        if isinstance(view, PagedView):
            return view.padding
        if self.batch == 1 or mask is None or mask[0] != "padding":
            return None
        return ~mask[1]

    def between(self, previous, current, same_object):
        """The `between` hint: describe_change per sequence; for a batch, the first
        sequence that changed names the kind."""
        if self.batch == 1:
            return describe_change(previous and previous[0], current and current[0], same_object)
        changes = [describe_change(previous and previous[b], current and current[b], same_object)
                   for b in range(self.batch)]
        changed = [(b, change) for b, change in enumerate(changes) if change["kind"] != "none"]
        if not changed:
            return changes[0]
        b, first = changed[0]
        layers = sorted({layer for _, change in changed for layer in change["layers"]})
        return {"kind": first["kind"], "layers": layers, "what": f"sequence {b}: {first['what']}"}

    def after_call(self, watched, pending, output):
        call, mask, (before, recurrent_before), count, fed = pending
        states = self.recurrent.read(watched.state_reader, watched.module, fed[2], output)
        if states is not None and not self.recurrent.used:
            self.first_recurrent_call(call)
        view = self.read_view(watched, fed[2], output)
        after = self.state_ids(watched, view, before, self.padding_of(mask, view))
        call["after"], after_ids = self.state_json(view, after)
        prefix = f"{watched.role}.call{watched.calls}"
        if mask is not None:
            call["attention_mask"] = self.mask_json(prefix, mask, count, before, after)
        call["logits"] = self.logits_json(prefix, output_logits(output), count)
        if self.reference == "self":
            self.add_self_reference(watched, call, prefix, mask, count, fed)
        recurrent = self.recurrent.call_json(watched.role, watched.calls, recurrent_before, states, fed[1], self.batch)
        if recurrent is not None:  # format version 3's `recurrent` (docs/capture-format-v3.md, "Recurrent state")
            call["recurrent"] = recurrent
        watched.last_after, watched.last_after_ids = after, after_ids
        watched.last_after_object = view.cache_object if view else None
        watched.calls += 1
        self.calls.append(call)

    def add_self_reference(self, watched, call, prefix, mask, count, fed):
        """The engine's own uncached logits for the call's logits rows (self_reference.py)."""
        ids, positions, arguments = fed
        if watched.self_reference is None:
            watched.self_reference = SelfReference(self.batch)
        real = real_inputs(mask, self.batch, count)
        watched.self_reference.feed(ids, positions, real)
        if call["logits"] is None or call["logits"]["rows"] == 0:
            return
        device = getattr(arguments.get("input_ids"), "device", None)
        rows = reference_rows(watched.self_reference, watched.original_forward, ids, positions, real,
                              call["logits"]["rows"], device)
        if rows is None:  # a position of the context never fed: no reference for this call
            return
        name = f"{prefix}.reference_logits"
        self.tensors[name] = rows.contiguous()
        call["logits"]["tensors"]["reference"] = name

    def state_ids(self, watched, view, reference, padding=None):
        """CacheView -> per sequence, LayerState per layer, registering rows never
        seen; None for no cache. reference: the per-sequence states it evolved
        from (None: none). padding: bool [batch, keys] of a batched call's 2-D mask."""
        if view is None:
            return None
        layers = len(view.raw_keys)
        if watched.num_layers is None:
            watched.num_layers = layers
        if layers > watched.num_layers:
            raise CaptureError(f"the cache has {layers} layers, the model {watched.num_layers}")
        reference = reference or [[] for _ in range(self.batch)]
        state = [[] for _ in range(self.batch)]
        for layer in range(watched.num_layers):
            if layer >= layers or view.raw_keys[layer] is None:
                for sequence in state:
                    sequence.append(LayerState.empty())
                continue
            source = TensorSource(view.raw_keys[layer], view.raw_values[layer])
            for b in range(self.batch):
                previous = reference[b][layer] if layer < len(reference[b]) else LayerState.empty()
                state[b].append(self.layer_state(watched, view, layer, b, previous, source, padding))
        return state

    def layer_state(self, watched, view, layer, sequence, previous, source, padding):
        """The LayerState of one sequence of one layer."""
        kept = previous.source.kept_slots(*source.tensors) if previous.source is not None else None
        # The previous state's tensors, or a prefix of them, not written since: its ids hold, unless
        # a mask (this call's, or the padding marks of the previous one) may say otherwise.
        if kept is not None and padding is None and not bool((previous.ids == PADDING).any()):
            return previous.prefix(kept, source)
        if self.batch == 1:
            keys, values = view.keys(layer), view.values(layer)
        else:
            keys = view.sequence_keys(layer, sequence, self.batch)
            values = view.sequence_values(layer, sequence, self.batch)
        keys, values = keys.detach().cpu(), values.detach().cpu()
        if keys.shape[1] != values.shape[1]:
            raise CaptureError(f"layer {layer}: {keys.shape[1]} key slots but {values.shape[1]} value slots")
        if self.shard is not None:
            self.shard.check_rows(watched.role, layer, keys.shape[0])
        masked = None
        if padding is not None:
            masked = torch.zeros(keys.shape[1], dtype=torch.bool)
            covered = min(keys.shape[1], padding.shape[1])  # the mask's key j is slot j (section 4)
            masked[:covered] = padding[sequence, :covered]
        layer_state = assign_ids(watched.layer_rows(layer), self.fingerprinter, keys, values,
                                 view.kinds[layer], previous, masked)
        layer_state.source = source
        return layer_state

    def state_json(self, view, state):
        """-> {"cache", "kinds", "layers"} and the id lists [sequence][layer]. A
        layer holds its runs for batch 1 (version 1), one list of runs per
        sequence for a batch (version 2)."""
        if view is None:
            return None, None
        layer_count = len(state[0])
        kinds = list(view.kinds) + ["append"] * (layer_count - len(view.kinds))
        id_lists = [[layer.id_list() for layer in sequence] for sequence in state]
        if not self.batched_layout():
            layers = [layer.runs() for layer in state[0]]
        else:
            layers = [[sequence[layer].runs() for sequence in state] for layer in range(layer_count)]
        out = {"cache": view.class_name, "kinds": kinds, "layers": layers}
        paged = view.paged_json() if isinstance(view, PagedView) else None
        if paged is not None:  # format version 3's `paged` (docs/capture-format-v3.md, "Paged pools")
            out["paged"] = paged
        return out, id_lists

    def mask_json(self, prefix, mask, count, before, after):
        kind, allowed = mask
        if after is not None:
            widths = {len(layer.ids) for layer in after[0]}
        else:
            widths = {(len(before[0][0].ids) if before and before[0] else 0) + count}
        if len(widths) != 1 or allowed.shape[-1] not in widths:
            raise CaptureError(f"attention_mask covers {allowed.shape[-1]} keys; the cache's slots after the call: "
                               f"{sorted(widths)}")
        name = f"{prefix}.attention_mask"
        if kind == "explicit" and allowed.dim() == 2 and self.batched_layout():
            allowed = allowed.unsqueeze(0)  # [1, n, K]: a batch of one in version 2's layout
        self.tensors[name] = allowed.to(torch.bool).contiguous()
        return {"kind": kind, "tensor": name}

    def logits_json(self, prefix, logits, inputs):
        if logits is None:
            return None
        logits = torch.as_tensor(logits).detach()
        if logits.dim() != 3 or logits.shape[0] != self.batch or logits.shape[1] > inputs:
            raise CaptureError(f"logits of shape {list(logits.shape)} for {inputs} inputs: "
                               f"expected [{self.batch}, rows <= {inputs}, vocab]")
        rows = logits.float().cpu()  # [batch, rows, vocab]
        if not self.batched_layout():
            rows = rows[0]  # version 1: [rows, vocab]
        if self.logits_mode["mode"] == "full":
            self.tensors[f"{prefix}.logits"] = rows.clone()
            return {"rows": rows.shape[-2], "tensors": {"logits": f"{prefix}.logits"}}
        k = min(self.logits_mode["k"], rows.shape[-1])
        values, ids = rows.topk(k, dim=-1)
        self.tensors[f"{prefix}.top_ids"] = ids.to(torch.int32)
        self.tensors[f"{prefix}.top_values"] = values.contiguous()
        # In float32, as the values are: within 2 ulps of a float64 sum rounded to float32, at a third of the
        # time (a 100-token prefill of a 152k vocabulary: 15M logits widened to float64 and summed).
        self.tensors[f"{prefix}.lse"] = torch.logsumexp(rows, dim=-1)
        return {"rows": rows.shape[-2], "tensors": {"top_ids": f"{prefix}.top_ids",
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
                    heads = self.shard.kv_heads[role][1] if self.shard else config["num_key_value_heads"]
                    shape = (heads or 1, 0, config["head_dim"] or 1)
                    keys = values = torch.zeros(shape, dtype=torch.float32)
                tensors[f"{role}.layer{layer}.keys"] = keys
                tensors[f"{role}.layer{layer}.values"] = values
        return tensors

    def format_version(self):
        """Version 1 for a batch of one (or no call), version 2 for a batch,
        version 3 for a rank's part of a tensor-parallel run, a run recorded with reference="self",
        or a paged engine's run whose reader gave blocks."""
        if self.shard is not None or self.reference is not None or self.paged_blocks or self.recurrent.used:
            return version.EXTENDED_FORMAT_VERSION
        return version.BATCH_FORMAT_VERSION if (self.batch or 1) > 1 else version.SINGLE_FORMAT_VERSION

    def batched_layout(self):
        """Every per-call field holds one entry per sequence (versions 2 and 3)."""
        return self.format_version() >= version.BATCH_FORMAT_VERSION

    def manifest(self, complete):
        models = {}
        for role, watched in self.roles.items():
            models[role] = dict(watched.model, layers=watched.num_layers or 0, calls=watched.calls)
        batched = self.batched_layout()
        committed = self.committed
        if committed is not None and not batched:
            committed = committed[0]
        manifest = {"format": version.FORMAT_NAME, "version": self.format_version(),
                    "engine": {"name": self.engine, "recorder": f"kvscope_capture {version.__version__}"},
                    "complete": complete, "logits": self.logits_mode, "models": models,
                    "calls": self.calls, "committed": committed}
        if batched:
            manifest["batch"] = self.batch or 1
        if self.shard is not None:
            manifest["shard"] = self.shard.json()
        if self.recurrent.used:  # format version 3: each recurrent state's provenance (recurrent.py)
            manifest["recurrent_states"] = self.recurrent.manifest_json()
        return manifest

    def write(self, complete):
        if self.committed is not None and len(self.committed) != (self.batch or 1):
            raise CaptureError(f"no capture written to {self.path}: commit() got {len(self.committed)} sequence(s) "
                               f"but the run's calls hold {self.batch}")
        tensors = self.row_tensors()
        tensors.update(self.tensors)
        metadata = {"format": version.FORMAT_NAME, "version": str(self.format_version()),
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



def is_sequence(item):
    """A list, tuple or 1-D tensor of token ids (not a single id)."""
    if isinstance(item, torch.Tensor):
        return item.dim() == 1
    return isinstance(item, (list, tuple))


def one_sequence(item, what):
    ids = torch.as_tensor(item)
    if ids.dim() != 1:
        raise ValueError(f"{what}: expected a list of token ids, got shape {list(ids.shape)}")
    return [int(token) for token in ids.tolist()]
