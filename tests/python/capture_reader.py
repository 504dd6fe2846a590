"""An independent reader and strict validator of .kvcapture files, versions 1
and 2 (docs/capture-format.md), written from the spec for the tests: it shares
no code with the recorder. Raises CaptureFormatError on any breach.

Version 2 (a batch of B sequences): `batched` is True, `batch` is B, and the
per-call fields hold one entry per sequence; `before_ids` / `after_ids` are
then [layer][sequence] slot lists (-2 a padding slot)."""
import json
import math

from safetensors_io import read_header, read_tensors

MAX_HEADER_BYTES = 100_000_000
MAX_CALLS = 1_000_000
MAX_LAYERS = 1024
MAX_ROWS = 1 << 24
MAX_SLOTS = 1 << 24
MAX_INPUTS = 1 << 20
MAX_VOCAB = 1 << 24
MAX_TOP_K = 1 << 16
MAX_HEADS = 1024
MAX_HEAD_DIM = 4096
MAX_BATCH = 1024
MAX_POSITION = (1 << 31) - 1
EMPTY, PADDING = -1, -2
ROLES = ("target", "drafter")
KINDS = ("append", "static", "ring")
SOURCES = ("position_ids", "cache_position", "past_length")
BETWEEN = ("crop", "reset", "slice", "overwrite", "roll", "replace", "none")
ROW_DTYPES = ("F32", "F16", "BF16")


class CaptureFormatError(ValueError):
    pass


def require(condition, message):
    if not condition:
        raise CaptureFormatError(message)


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def int_list(value, what, low=None, high=None, limit=MAX_SLOTS):
    require(isinstance(value, list), f"{what}: not a list")
    require(len(value) <= limit, f"{what}: {len(value)} entries, limit {limit}")
    for item in value:
        require(is_int(item), f"{what}: {item!r} is not an integer")
        require(low is None or item >= low, f"{what}: {item} < {low}")
        require(high is None or item < high, f"{what}: {item} >= {high}")
    return value


class Capture:
    """manifest, tensors (name -> torch tensor), rows[role][layer] = (keys, values)
    [kv_heads, rows, head_dim], and for each call `before_ids` / `after_ids`:
    row id per slot (-1 empty) per layer, or None."""

    def __init__(self, path):
        header, _ = read_header(path)
        require(len(json.dumps(header)) <= MAX_HEADER_BYTES, "header too large")
        metadata = header.get("__metadata__")
        require(isinstance(metadata, dict), "no __metadata__")
        require(metadata.get("format") == "kvscope-capture", "__metadata__.format is not kvscope-capture")
        require(metadata.get("version") in ("1", "2", "3"),
                f"__metadata__.version {metadata.get('version')!r} is not '1', '2' or '3'")
        self.version = int(metadata["version"])
        require(isinstance(metadata.get("kvscope_capture"), str), "__metadata__.kvscope_capture is not a string")
        self.manifest = json.loads(metadata["kvscope_capture"])
        self.tensors, _ = read_tensors(path)
        self.header = {name: entry for name, entry in header.items() if name != "__metadata__"}
        self.referenced = set()
        self.logits_width = {}
        self.validate()

    # --- tensors -----------------------------------------------------------

    def tensor(self, name, dtypes, shape):
        """Checks a referenced tensor's dtype and shape (None = any extent)."""
        require(isinstance(name, str) and name in self.header, f"tensor {name!r} does not exist")
        require(name not in self.referenced, f"tensor {name!r} is referenced twice")
        entry = self.header[name]
        require(entry["dtype"] in dtypes, f"{name}: dtype {entry['dtype']} not in {dtypes}")
        require(len(entry["shape"]) == len(shape), f"{name}: shape {entry['shape']}, expected rank {len(shape)}")
        for actual, expected in zip(entry["shape"], shape):
            require(expected is None or actual == expected, f"{name}: shape {entry['shape']}, expected {shape}")
        self.referenced.add(name)
        return self.tensors[name]

    # --- manifest ------------------------------------------------------------

    def validate(self):
        m = self.manifest
        require(isinstance(m, dict), "manifest is not an object")
        require(m.get("format") == "kvscope-capture" and m.get("version") == self.version, "manifest format/version")
        self.batched = self.version >= 2  # version 3: version 2's layout plus optional fields
        self.batch = m.get("batch") if self.batched else 1
        require(is_int(self.batch) and 1 <= self.batch <= MAX_BATCH, f"batch {self.batch!r} not in [1, {MAX_BATCH}]")
        require(isinstance(m.get("engine"), dict) and isinstance(m["engine"].get("name"), str)
                and isinstance(m["engine"].get("recorder"), str), "engine")
        require(isinstance(m.get("complete"), bool), "complete")
        self.validate_logits_mode(m.get("logits"))
        self.validate_models(m.get("models"))
        self.validate_shard(m.get("shard"))
        calls = m.get("calls")
        require(isinstance(calls, list) and len(calls) <= MAX_CALLS, "calls")
        counts = {role: 0 for role in self.models}
        for position, call in enumerate(calls):
            self.validate_call(position, call, counts)
        for role, model in self.models.items():
            require(model["calls"] == counts[role], f"models.{role}.calls {model['calls']} != {counts[role]}")
        committed = m.get("committed")
        if committed is not None and self.batched:
            require(isinstance(committed, list) and len(committed) == self.batch,
                    f"committed: {len(committed) if isinstance(committed, list) else committed!r} sequences for a batch of {self.batch}")
            for b, sequence in enumerate(committed):
                int_list(sequence, f"committed[{b}]", 0, self.vocab("target"), MAX_SLOTS)
        elif committed is not None:
            int_list(committed, "committed", 0, self.vocab("target"), MAX_SLOTS)
        unreferenced = set(self.header) - self.referenced
        require(not unreferenced, f"tensors no call or model references: {sorted(unreferenced)[:5]}")

    def validate_shard(self, shard):
        """docs/capture-format-v3.md: a tensor-parallel rank's KV heads; the rows must hold that many."""
        self.shard = shard
        if shard is None:
            return
        require(self.version >= 3, "shard in a version 1 or 2 file")
        require(isinstance(shard, dict) and is_int(shard.get("ranks")) and 1 <= shard["ranks"] <= 1024, "shard.ranks")
        require(is_int(shard.get("rank")) and 0 <= shard["rank"] < shard["ranks"], "shard.rank")
        heads = shard.get("kv_heads")
        require(isinstance(heads, dict) and set(heads) == set(self.models), "shard.kv_heads: one entry per role")
        for role, pair in heads.items():
            require(isinstance(pair, list) and len(pair) == 2 and all(is_int(v) for v in pair)
                    and pair[0] >= 0 and pair[1] >= 1, f"shard.kv_heads.{role}")
            whole = self.models[role]["config"].get("num_key_value_heads")
            require(whole is None or pair[0] + pair[1] <= whole, f"shard.kv_heads.{role} past the model's heads")

    def validate_logits_mode(self, mode):
        require(isinstance(mode, dict) and mode.get("mode") in ("full", "top_k"), "logits.mode")
        if mode["mode"] == "top_k":
            require(is_int(mode.get("k")) and 1 <= mode["k"] <= MAX_TOP_K, "logits.k")
        self.logits_mode = mode

    def validate_models(self, models):
        require(isinstance(models, dict) and "target" in models, "models.target missing")
        require(set(models) <= set(ROLES), f"unknown roles {sorted(set(models) - set(ROLES))}")
        self.models = models
        self.rows = {}
        for role, model in models.items():
            require(isinstance(model.get("name_or_path"), str), f"models.{role}.name_or_path")
            require(isinstance(model.get("config"), dict), f"models.{role}.config")
            require(is_int(model.get("layers")) and 0 <= model["layers"] <= MAX_LAYERS, f"models.{role}.layers")
            require(is_int(model.get("calls")) and model["calls"] >= 0, f"models.{role}.calls")
            self.validate_fingerprint(role, model.get("fingerprint"))
            self.rows[role] = [self.layer_rows(role, layer) for layer in range(model["layers"])]

    def validate_fingerprint(self, role, fingerprint):
        if fingerprint is None:
            return
        require(fingerprint.get("tensor") == "input_embeddings", f"models.{role}.fingerprint.tensor")
        int_list(fingerprint.get("shape"), f"models.{role}.fingerprint.shape", 1)
        require(len(fingerprint["shape"]) == 2, f"models.{role}.fingerprint.shape rank")
        for key in ("sum", "sum_squares"):
            value = fingerprint.get(key)
            require(isinstance(value, (int, float)) and math.isfinite(value), f"models.{role}.fingerprint.{key}")

    def layer_rows(self, role, layer):
        prefix = f"{role}.layer{layer}"
        keys_entry = self.header.get(f"{prefix}.keys")
        require(keys_entry is not None, f"tensor {prefix}.keys does not exist")
        shape = keys_entry["shape"]
        require(len(shape) == 3 and 1 <= shape[0] <= MAX_HEADS and shape[1] <= MAX_ROWS
                and 1 <= shape[2] <= MAX_HEAD_DIM, f"{prefix}.keys: shape {shape}")
        keys = self.tensor(f"{prefix}.keys", ROW_DTYPES, shape)
        values = self.tensor(f"{prefix}.values", (keys_entry["dtype"],), shape)
        return keys, values

    def vocab(self, role):
        vocab = self.models[role]["config"].get("vocab_size") if role in self.models else None
        return vocab if is_int(vocab) and 0 < vocab <= MAX_VOCAB else None

    def validate_call(self, position, call, counts):
        what = f"calls[{position}]"
        require(isinstance(call, dict) and call.get("role") in self.models, f"{what}.role")
        role = call["role"]
        require(call.get("index") == counts[role], f"{what}.index {call.get('index')} != {counts[role]}")
        counts[role] += 1
        if self.batched:
            n = self.validate_batch_inputs(call, role, what)
        else:
            ids = int_list(call.get("input_ids"), f"{what}.input_ids", 0, self.vocab(role), MAX_INPUTS)
            n = len(ids)
            require(n >= 1, f"{what}.input_ids is empty")
            positions = int_list(call.get("positions"), f"{what}.positions", 0, None, MAX_INPUTS)
            require(len(positions) == n, f"{what}.positions: {len(positions)} for {n} inputs")
        require(call.get("positions_source") in SOURCES, f"{what}.positions_source")
        if call.get("cache_position") is not None:
            cache_position = int_list(call["cache_position"], f"{what}.cache_position", 0, None, MAX_INPUTS)
            require(len(cache_position) == n, f"{what}.cache_position length")
        if call["positions_source"] == "cache_position":
            rows = call["positions"] if self.batched else [call["positions"]]
            require(all(row == call.get("cache_position") for row in rows),
                    f"{what}: positions_source cache_position but they differ")
        call["before_ids"] = self.state(call.get("before"), role, f"{what}.before")
        call["after_ids"] = self.state(call.get("after"), role, f"{what}.after")
        self.validate_between(call.get("between"), call["index"], role, f"{what}.between")
        self.validate_mask(call, n, what)
        self.validate_call_logits(call.get("logits"), n, role, what)

    def validate_batch_inputs(self, call, role, what):
        """Version 2: input_ids and positions are B lists of n; returns n."""
        ids, positions = call.get("input_ids"), call.get("positions")
        for name, rows in (("input_ids", ids), ("positions", positions)):
            require(isinstance(rows, list) and len(rows) == self.batch,
                    f"{what}.{name}: {len(rows) if isinstance(rows, list) else rows!r} rows for a batch of {self.batch}")
        n = len(ids[0]) if isinstance(ids[0], list) else 0
        require(1 <= n and n * self.batch <= MAX_INPUTS, f"{what}.input_ids: {n} inputs per sequence")
        for b in range(self.batch):
            row = int_list(ids[b], f"{what}.input_ids[{b}]", 0, self.vocab(role), MAX_INPUTS)
            require(len(row) == n, f"{what}.input_ids[{b}]: {len(row)} inputs where sequence 0 has {n}")
            row = int_list(positions[b], f"{what}.positions[{b}]", 0, MAX_POSITION + 1, MAX_INPUTS)
            require(len(row) == n, f"{what}.positions[{b}]: {len(row)} for {n} inputs")
        return n

    def state(self, state, role, what):
        """A state -> row id per slot per layer; checks every run."""
        if state is None:
            return None
        layers = self.models[role]["layers"]
        require(isinstance(state, dict) and isinstance(state.get("cache"), str), f"{what}.cache")
        require(isinstance(state.get("kinds"), list) and len(state["kinds"]) == layers
                and all(kind in KINDS for kind in state["kinds"]), f"{what}.kinds")
        require(isinstance(state.get("layers"), list) and len(state["layers"]) == layers, f"{what}.layers")
        decoded = []
        for layer, layer_runs in enumerate(state["layers"]):
            row_count = self.rows[role][layer][0].shape[1]
            where = f"{what}.layers[{layer}]"
            if not self.batched:
                slots = self.decode_runs(layer_runs, row_count, where)
                require(state["kinds"][layer] != "append" or -1 not in slots, f"{where}: an empty slot in an append layer")
                decoded.append(slots)
                continue
            require(isinstance(layer_runs, list) and len(layer_runs) == self.batch,
                    f"{where}: not one list of runs per sequence of {self.batch}")
            seen, sequences = set(), []
            for b, sequence_runs in enumerate(layer_runs):
                slots = self.decode_runs(sequence_runs, row_count, f"{where}[{b}]", seen, allow_padding=True)
                require(state["kinds"][layer] != "append" or EMPTY not in slots, f"{where}[{b}]: an empty slot in an append layer")
                require(len(slots) == len(sequences[0]) if sequences else True,
                        f"{where}[{b}]: {len(slots)} slots where sequence 0 has {len(sequences[0]) if sequences else 0}")
                sequences.append(slots)
            require(len(sequences[0]) * self.batch <= MAX_SLOTS, f"{where}: more than {MAX_SLOTS} slots")
            decoded.append(sequences)
        return decoded

    @staticmethod
    def decode_runs(layer_runs, row_count, what, seen=None, allow_padding=False):
        require(isinstance(layer_runs, list), f"{what}: not a list")
        slots, seen = [], set() if seen is None else seen
        for run in layer_runs:
            require(isinstance(run, list) and len(run) == 2 and is_int(run[0]) and is_int(run[1]), f"{what}: run {run!r}")
            first, count = run
            require(count >= 1 and len(slots) + count <= MAX_SLOTS, f"{what}: run count {count}")
            if first == EMPTY or (first == PADDING and allow_padding):
                slots.extend([first] * count)
                continue
            require(0 <= first and first + count <= row_count, f"{what}: rows {first}..{first + count - 1} of {row_count}")
            require(not any(row in seen for row in range(first, first + count)), f"{what}: a row id repeats")
            seen.update(range(first, first + count))
            slots.extend(range(first, first + count))
        return slots

    def validate_between(self, between, index, role, what):
        if index == 0:
            require(between is None, f"{what}: must be null for a role's first call")
            return
        require(isinstance(between, dict) and between.get("kind") in BETWEEN, f"{what}.kind")
        int_list(between.get("layers"), f"{what}.layers", 0, self.models[role]["layers"])
        require(isinstance(between.get("what"), str), f"{what}.what")

    def validate_mask(self, call, n, what):
        mask = call.get("attention_mask")
        if mask is None:
            return
        require(isinstance(mask, dict) and mask.get("kind") in ("padding", "explicit"), f"{what}.attention_mask.kind")
        def slot_count(layer):
            return len(layer[0]) if self.batched else len(layer)
        if call["after_ids"] is not None:
            widths = {slot_count(layer) for layer in call["after_ids"]}
        else:
            widths = {(slot_count(call["before_ids"][0]) if call["before_ids"] else 0) + n}
        require(len(widths) == 1, f"{what}.attention_mask: layers have different slot counts")
        width = widths.pop()
        if self.batched:
            shape = (self.batch, n, width) if mask["kind"] == "explicit" else (self.batch, width)
        else:
            shape = (n, width) if mask["kind"] == "explicit" else (1, width)
        self.tensor(mask.get("tensor"), ("BOOL",), shape)

    def validate_call_logits(self, logits, n, role, what):
        if logits is None:
            return
        require(isinstance(logits, dict) and is_int(logits.get("rows")) and 0 <= logits["rows"] <= n, f"{what}.logits.rows")
        names = logits.get("tensors")
        require(isinstance(names, dict), f"{what}.logits.tensors")
        rows = logits["rows"]
        lead = (self.batch, rows) if self.batched else (rows,)  # version 2: [B, rows, ...]
        if self.logits_mode["mode"] == "full":
            require(set(names) == {"logits"}, f"{what}.logits.tensors names")
            tensor = self.tensor(names["logits"], ("F32",), lead + (None,))
            require(1 <= tensor.shape[-1] <= MAX_VOCAB, f"{what}: logits width")
            width = self.logits_width.setdefault(role, tensor.shape[-1])
            require(tensor.shape[-1] == width, f"{what}: logits width {tensor.shape[-1]}, earlier calls {width}")
            return
        require(set(names) == {"top_ids", "top_values", "lse"}, f"{what}.logits.tensors names")
        ids = self.tensor(names["top_ids"], ("I32",), lead + (None,))
        require(1 <= ids.shape[-1] <= self.logits_mode["k"], f"{what}: top_k width")
        self.tensor(names["top_values"], ("F32",), lead + (ids.shape[-1],))
        self.tensor(names["lse"], ("F32",), lead)
        vocab = self.vocab(role)
        require(vocab is None or bool(((ids >= 0) & (ids < vocab)).all()), f"{what}: top ids outside the vocabulary")

    # --- queries the tests use ------------------------------------------------

    def calls(self, role):
        return [call for call in self.manifest["calls"] if call["role"] == role]

    def row(self, role, layer, row_id):
        """(key, value) [kv_heads, head_dim] of one row."""
        keys, values = self.rows[role][layer]
        return keys[:, row_id], values[:, row_id]
