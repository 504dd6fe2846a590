#!/usr/bin/env python3
"""Writes the hand-made version 2 (batched) captures of fuzz/regression/capture/
(docs/capture-format-v2.md): one valid two-sequence capture and hostile
edits of it, each refused by CaptureFile::open with an Error naming the field
(tests/core/base/capture_batch_test.cpp checks the same refusals on a capture
built the same way). Deterministic: rerun to rewrite them.

    /usr/bin/python3 fuzz/make_capture_regression.py"""
import copy
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "regression", "capture")


def floats(shape):
    count = 1
    for extent in shape:
        count *= extent
    return "F32", shape, struct.pack(f"<{count}f", *[0.25 * (i % 13) - 1.0 for i in range(count)])


def bools(rows):
    return "BOOL", [len(rows), len(rows[0])], bytes(value for row in rows for value in row)


def state(layers):
    return {"cache": "DynamicCache", "kinds": ["append"], "layers": layers}


def valid():
    """Two sequences, one target layer: [5, 6] left-padded by one slot and [7, 8, 9]."""
    after0 = [[[[-2, 1], [0, 2]], [[2, 3]]]]
    after1 = [[[[-2, 1], [0, 2], [5, 1]], [[2, 3], [6, 1]]]]
    manifest = {
        "format": "kvscope-capture", "version": 2, "batch": 2,
        "engine": {"name": "fuzz/make_capture_regression.py", "recorder": "hand-built"},
        "complete": True, "logits": {"mode": "full"},
        "models": {"target": {"name_or_path": "tiny", "config": {"vocab_size": 16, "num_hidden_layers": 1},
                              "fingerprint": None, "layers": 1, "calls": 2}},
        "calls": [
            {"role": "target", "index": 0, "input_ids": [[0, 5, 6], [7, 8, 9]], "positions": [[1, 0, 1], [0, 1, 2]],
             "positions_source": "position_ids", "cache_position": None,
             "attention_mask": {"kind": "padding", "tensor": "target.call0.attention_mask"},
             "before": None, "between": None, "after": state(after0),
             "logits": {"rows": 3, "tensors": {"logits": "target.call0.logits"}}},
            {"role": "target", "index": 1, "input_ids": [[3], [4]], "positions": [[2], [3]],
             "positions_source": "position_ids", "cache_position": None,
             "attention_mask": {"kind": "padding", "tensor": "target.call1.attention_mask"},
             "before": state(after0), "between": {"kind": "none", "layers": [], "what": "unchanged"},
             "after": state(after1), "logits": {"rows": 1, "tensors": {"logits": "target.call1.logits"}}}],
        "committed": [[5, 6, 3, 11], [7, 8, 9, 4, 12]]}
    tensors = {"target.layer0.keys": floats([1, 7, 2]), "target.layer0.values": floats([1, 7, 2]),
               "target.call0.attention_mask": bools([[0, 1, 1], [1, 1, 1]]),
               "target.call0.logits": floats([2, 3, 16]),
               "target.call1.attention_mask": bools([[0, 1, 1, 1], [1, 1, 1, 1]]),
               "target.call1.logits": floats([2, 1, 16])}
    return manifest, tensors


def encode(manifest, tensors, version="2"):
    header = {"__metadata__": {"format": "kvscope-capture", "version": version,
                               "kvscope_capture": json.dumps(manifest, separators=(",", ":"))}}
    offset, data = 0, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + data


def edited(change):
    manifest, tensors = valid()
    manifest = copy.deepcopy(manifest)
    change(manifest, tensors)
    return encode(manifest, tensors)


def hostile():
    """name -> bytes: the valid capture and one breach of each new field."""
    calls = lambda m: m["calls"]  # noqa: E731
    return {
        "batch_valid": edited(lambda m, t: None),
        "batch_negative": edited(lambda m, t: m.update(batch=-2)),
        "batch_huge": edited(lambda m, t: m.update(batch=1 << 62)),
        "batch_missing": edited(lambda m, t: m.pop("batch")),
        "batch_committed_count": edited(lambda m, t: m["committed"].pop()),
        "batch_position_negative": edited(lambda m, t: calls(m)[0]["positions"][1].__setitem__(2, -1)),
        "batch_position_huge": edited(lambda m, t: calls(m)[0]["positions"][0].__setitem__(0, 1 << 40)),
        "batch_input_rows": edited(lambda m, t: calls(m)[1]["input_ids"].append([1])),
        "batch_slot_counts_differ": edited(lambda m, t: calls(m)[1]["after"]["layers"][0][1].pop()),
        "batch_row_shared": edited(lambda m, t: calls(m)[1]["after"]["layers"][0][1].__setitem__(1, [0, 1])),
        "batch_slots_amplified": edited(lambda m, t: calls(m)[0].update(before={
            "cache": "StaticCache", "kinds": ["static"], "layers": [[[[-1, 1 << 24]], [[-1, 1 << 24]]]]})),
        "batch_logits_without_batch_axis": edited(lambda m, t: t.update({"target.call1.logits": floats([1, 16])})),
    }


def main():
    for name, data in hostile().items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
