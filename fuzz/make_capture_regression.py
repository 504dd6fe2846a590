#!/usr/bin/env python3
"""Writes the hand-made captures of fuzz/regression/capture/: the version 3
shard (a tensor-parallel rank's capture), the version 3 paged pools (paged_*),
the version 3 recurrent states of a hybrid model (recurrent_*),
the version 2
(batched) ones (docs/capture-format-v2.md), one valid two-sequence capture and
hostile edits of it, each refused by CaptureFile::open with an Error naming the
field (tests/core/base/capture_batch_test.cpp checks the same refusals on a
capture built the same way); and the hostile_* ones, files that once passed
open and cost the timeline, the check or the GUI gigabytes, minutes or a
backtrace (docs/hostile-inputs.md), each refused at open now
(tests/core/base/capture_hostile_test.cpp names each one's error).
Deterministic: rerun to rewrite them.

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


def static_state(layers):
    """A version 1 StaticCache state of the given per-layer run lists."""
    return {"cache": "StaticCache", "kinds": ["static"] * len(layers), "layers": layers}


def v1_static(layers=1, calls=2, slots=16, config=None, logits=None):
    """A version 1 capture of a static cache: `calls` target calls of one token
    each, token i at position i, every layer holding rows 0..i in its first
    slots of `slots`; row tensors [1, calls, 2] per layer."""
    manifest = {
        "format": "kvscope-capture", "version": 1,
        "engine": {"name": "fuzz/make_capture_regression.py", "recorder": "hand-built"},
        "complete": True, "logits": logits or {"mode": "full"},
        "models": {"target": {"name_or_path": "tiny", "config": config or {"vocab_size": 16},
                              "fingerprint": None, "layers": layers, "calls": calls}},
        "calls": [], "committed": [1 + i for i in range(calls)]}
    tensors = {}
    for layer in range(layers):
        tensors["target.layer%d.keys" % layer] = floats([1, calls, 2])
        tensors["target.layer%d.values" % layer] = floats([1, calls, 2])

    def held(i):
        return [[0, i], [-1, slots - i]] if i else [[-1, slots]]
    for i in range(calls):
        manifest["calls"].append({
            "role": "target", "index": i, "input_ids": [1 + i], "positions": [i],
            "positions_source": "cache_position", "cache_position": [i], "attention_mask": None,
            "before": static_state([held(i)] * layers),
            "between": None if i == 0 else {"kind": "none", "layers": [], "what": "unchanged"},
            "after": static_state([held(i + 1)] * layers), "logits": None})
    return manifest, tensors


def v1_edited(change, **shape):
    manifest, tensors = v1_static(**shape)
    change(manifest, tensors)
    return encode(manifest, tensors, version="1")


def int32s(shape, values):
    count = 1
    for extent in shape:
        count *= extent
    return "I32", shape, struct.pack(f"<{count}i", *[values[i % len(values)] for i in range(count)])


def with_top_k_logits(ids, vocab_size=None):
    """A change giving call 0 top-k logits whose ids are `ids` (config without a vocab_size by default)."""
    def change(m, t):
        m["logits"] = {"mode": "top_k", "k": 2}
        m["models"]["target"]["config"] = {"vocab_size": vocab_size}
        m["calls"][0]["logits"] = {"rows": 1, "tensors": {"top_ids": "target.call0.top_ids",
                                                         "top_values": "target.call0.top_values",
                                                         "lse": "target.call0.lse"}}
        t["target.call0.top_ids"] = int32s([1, 2], ids)
        t["target.call0.top_values"] = floats([1, 2])
        t["target.call0.lse"] = floats([1])
    return change


def hostile_v1():
    """name -> bytes: each class of hostile file the timeline, check or GUI met past open."""
    empty = [[-1, 1 << 24]]
    int64_max = (1 << 63) - 1
    call0 = lambda m: m["calls"][0]  # noqa: E731
    return {
        "hostile_valid_static": v1_edited(lambda m, t: None),
        # 6 static layers of 2^24 empty slots: 18 s and 2.8 GB in check once.
        "hostile_static_6_layers_2_24_slots": v1_edited(
            lambda m, t: call0(m).update(before=static_state([empty] * 6)), layers=6),
        # Each layer within its limit, the layers of a state together past theirs.
        "hostile_static_6_layers_2_18_slots": v1_edited(
            lambda m, t: call0(m).update(before=static_state([[[-1, 1 << 18]]] * 6)), layers=6),
        "hostile_static_1024_layers_2_24_slots": v1_edited(
            lambda m, t: call0(m).update(before=static_state([empty] * 1024)), layers=1024, calls=1),
        # Within every limit, at the largest layer a state may have, every slot
        # attended (its calls sit at the last cache positions): what the
        # timeline and the GUI must still walk within seconds and 1.5 GB.
        "hostile_static_2_20_slots_attended": v1_edited(
            lambda m, t: [c.update(positions=[(1 << 20) - 2 + i], cache_position=[(1 << 20) - 2 + i])
                          for i, c in enumerate(m["calls"])], calls=2, slots=1 << 20),
        # Each state within its limit, the file's states together far past theirs.
        "hostile_slots_across_calls": v1_edited(lambda m, t: None, calls=12, slots=1 << 20),
        "hostile_engine_name_1mb": v1_edited(lambda m, t: m["engine"].update(name="k" * (1 << 20))),
        "hostile_between_what_long": v1_edited(lambda m, t: m["calls"][1]["between"].update(what="w" * 5000)),
        "hostile_name_or_path_long": v1_edited(lambda m, t: m["models"]["target"].update(name_or_path="/m" * 3000)),
        "hostile_cache_position_int64_max": v1_edited(
            lambda m, t: call0(m).update(cache_position=[int64_max], positions_source="position_ids")),
        "hostile_positions_int64_max": v1_edited(
            lambda m, t: call0(m).update(positions=[int64_max], positions_source="position_ids", cache_position=None)),
        "hostile_positions_2_31": v1_edited(
            lambda m, t: call0(m).update(positions=[1 << 31], cache_position=[1 << 31])),
        "hostile_top_ids_negative": v1_edited(with_top_k_logits([-7, 3])),
        "hostile_top_ids_2_31_minus_1": v1_edited(with_top_k_logits([(1 << 31) - 1, 3])),
        "hostile_top_ids_past_vocab": v1_edited(with_top_k_logits([3, 16], vocab_size=16)),
        "hostile_committed_2_40": v1_edited(
            lambda m, t: (m["models"]["target"].update(config={}), m["committed"].__setitem__(0, 1 << 40))),
        "hostile_input_id_2_40": v1_edited(
            lambda m, t: (m["models"]["target"].update(config={}), call0(m).__setitem__("input_ids", [1 << 40]))),
    }


def hostile_v2():
    """The version 2 fields the same way: positions per sequence, cache_position, top-k ids."""
    calls = lambda m: m["calls"]  # noqa: E731
    return {
        "batch_cache_position_int64_max": edited(lambda m, t: calls(m)[1].update(cache_position=[(1 << 63) - 1])),
        "batch_positions_int64_max_row1": edited(
            lambda m, t: calls(m)[1]["positions"].__setitem__(1, [(1 << 63) - 1])),
        "batch_engine_name_bidi_long": edited(lambda m, t: m["engine"].update(name="\u202e" * 5000)),
        "batch_top_ids_negative": edited(lambda m, t: (
            m.update(logits={"mode": "top_k", "k": 2}),
            m["models"]["target"].update(config={"vocab_size": None}),
            [c.update(logits={"rows": 1, "tensors": {"top_ids": "target.call%d.top_ids" % i,
                                                      "top_values": "target.call%d.top_values" % i,
                                                      "lse": "target.call%d.lse" % i}}) for i, c in enumerate(calls(m))],
            [t.pop("target.call%d.logits" % i) for i in range(2)],
            [t.update({"target.call%d.top_ids" % i: int32s([2, 1, 2], [5, -7]),
                       "target.call%d.top_values" % i: floats([2, 1, 2]),
                       "target.call%d.lse" % i: floats([2, 1])}) for i in range(2)])),
    }


def shard_edited(change):
    """A version 3 rank's capture (docs/capture-format-v3.md): the valid batch as rank 1 of 2 of a model
    with 2 KV heads, its rows holding one; then `change`."""
    def both(m, t):
        m.update(version=3, shard={"rank": 1, "ranks": 2, "kv_heads": {"target": [1, 1]}})
        m["models"]["target"]["config"]["num_key_value_heads"] = 2
        change(m, t)
    manifest, tensors = valid()
    manifest = copy.deepcopy(manifest)
    both(manifest, tensors)
    return encode(manifest, tensors, version="3")


def hostile_v3():
    """The version 3 shard the same way: ranks, heads, rows that do not hold the heads said."""
    shard = lambda m: m["shard"]  # noqa: E731
    return {
        "shard_valid": shard_edited(lambda m, t: None),
        "shard_rank_outside": shard_edited(lambda m, t: shard(m).update(rank=2)),
        "shard_ranks_huge": shard_edited(lambda m, t: shard(m).update(ranks=1 << 62)),
        "shard_heads_past_model": shard_edited(lambda m, t: shard(m)["kv_heads"].update(target=[1, 1 << 40])),
        "shard_heads_negative": shard_edited(lambda m, t: shard(m)["kv_heads"].update(target=[-1, 1])),
        "shard_unknown_role": shard_edited(lambda m, t: shard(m)["kv_heads"].update(drafter=[0, 1])),
        "shard_rows_not_the_heads": shard_edited(lambda m, t: shard(m)["kv_heads"].update(target=[0, 2])),
        "shard_in_version_2": edited(lambda m, t: m.update(shard={"rank": 0, "ranks": 1, "kv_heads": {"target": [0, 1]}})),
        "rows_not_the_config_heads": edited(lambda m, t: m["models"]["target"]["config"].update(num_key_value_heads=4)),
        "reference_valid": shard_edited(lambda m, t: with_reference(m, t, [2, 1, 16])),
        "reference_wrong_width": shard_edited(lambda m, t: with_reference(m, t, [2, 1, 15])),
        "reference_without_batch_axis": shard_edited(lambda m, t: with_reference(m, t, [1, 16])),
        "reference_in_version_2": edited(lambda m, t: with_reference(m, t, [2, 1, 16])),
        "reference_names_the_logits": shard_edited(
            lambda m, t: m["calls"][1]["logits"]["tensors"].update(reference="target.call1.logits")),
    }


# Paged pools (version 3's `paged`, docs/capture-format-v3.md): the valid batch
# as a paged engine's, a pool of 4 blocks of 2 rows; then `change`.
PAGED_POOLS = ([[[[-2, 1], [0, 2]], [[2, 3]]]], [[[[-2, 1], [0, 2], [4, 1]], [[2, 4]]]])


def paged_edited(change):
    def both(m, t):
        m.update(version=3)
        for call, pool in zip(m["calls"], PAGED_POOLS):
            call["after"]["paged"] = {"block_size": 2, "num_blocks": 4, "layers": copy.deepcopy(pool), "free": [[3, 1]]}
        m["calls"][1]["before"] = copy.deepcopy(m["calls"][0]["after"])
        change(m, t)
    manifest, tensors = valid()
    manifest = copy.deepcopy(manifest)
    both(manifest, tensors)
    return encode(manifest, tensors, version="3")


def hostile_paged():
    """The version 3 paged field the same way: pool bounds, pool slots, padding, free blocks."""
    paged = lambda m: m["calls"][1]["after"]["paged"]  # noqa: E731
    return {
        "paged_valid": paged_edited(lambda m, t: None),
        "paged_block_size_zero": paged_edited(lambda m, t: paged(m).update(block_size=0)),
        "paged_block_size_2_40": paged_edited(lambda m, t: paged(m).update(block_size=1 << 40)),
        "paged_num_blocks_negative": paged_edited(lambda m, t: paged(m).update(num_blocks=-1)),
        "paged_pool_past_2_30": paged_edited(lambda m, t: paged(m).update(block_size=1 << 16, num_blocks=1 << 20)),
        "paged_slot_past_pool": paged_edited(lambda m, t: paged(m)["layers"][0].__setitem__(1, [[6, 4]])),
        "paged_slot_int64_max": paged_edited(lambda m, t: paged(m)["layers"][0].__setitem__(1, [[(1 << 63) - 1, 4]])),
        "paged_count_2_40": paged_edited(lambda m, t: paged(m)["layers"][0].__setitem__(1, [[2, 1 << 40]])),
        "paged_slots_not_tiled": paged_edited(lambda m, t: paged(m)["layers"][0].__setitem__(1, [[2, 3]])),
        "paged_padding_moved": paged_edited(lambda m, t: paged(m)["layers"][0].__setitem__(1, [[-2, 1], [2, 3]])),
        "paged_runs_past_slots": paged_edited(
            lambda m, t: paged(m)["layers"][0].__setitem__(1, [[2, 1]] * 100000)),
        "paged_free_past_pool": paged_edited(lambda m, t: paged(m).update(free=[[3, 1 << 40]])),
        "paged_in_version_2": edited(lambda m, t: m["calls"][1]["after"].update(
            paged={"block_size": 2, "num_blocks": 4, "layers": PAGED_POOLS[1]})),
    }


# Recurrent state (version 3's `recurrent` and `recurrent_states`, docs/capture-format-v3.md,
# "Recurrent state"): the valid batch as a hybrid model's whose layer 0 also keeps a conv and
# an SSM state; call 0 computes states 0 / 1 (sequence 0) and 2 / 3 (sequence 1) from none.
def recurrent_states():
    return [{"id": i, "layer": 0, "kind": "conv" if i % 2 == 0 else "ssm", "call": 0, "input": 2, "from": None,
             "after_position": 1 if i < 2 else 2} for i in range(4)]


def recurrent_edited(change):
    def both(m, t):
        m.update(version=3, recurrent_states={"target": recurrent_states()})
        ids = [[{"layer": 0, "kind": "conv", "id": 0}, {"layer": 0, "kind": "ssm", "id": 1}],
               [{"layer": 0, "kind": "conv", "id": 2}, {"layer": 0, "kind": "ssm", "id": 3}]]
        m["calls"][0]["recurrent"] = {"before": None, "after": copy.deepcopy(ids)}
        m["calls"][1]["recurrent"] = {"before": copy.deepcopy(ids), "after": copy.deepcopy(ids)}
        change(m, t)
    manifest, tensors = valid()
    manifest = copy.deepcopy(manifest)
    both(manifest, tensors)
    return encode(manifest, tensors, version="3")


def hostile_recurrent():
    """The version 3 recurrent fields the same way: ids, layers, kinds, provenance, per-input lists."""
    states = lambda m: m["recurrent_states"]["target"]  # noqa: E731
    before = lambda m: m["calls"][1]["recurrent"]["before"]  # noqa: E731
    return {
        "recurrent_valid": recurrent_edited(lambda m, t: None),
        "recurrent_id_out_of_order": recurrent_edited(lambda m, t: states(m)[1].update(id=7)),
        "recurrent_layer_past_model": recurrent_edited(lambda m, t: states(m)[0].update(layer=1 << 40)),
        "recurrent_kind_unknown": recurrent_edited(lambda m, t: states(m)[0].update(kind="attention")),
        "recurrent_from_later": recurrent_edited(lambda m, t: states(m)[0].update({"from": 2})),
        "recurrent_from_self_cycle": recurrent_edited(lambda m, t: states(m)[2].update({"from": 2})),
        "recurrent_position_huge": recurrent_edited(lambda m, t: states(m)[0].update(after_position=1 << 40)),
        "recurrent_half_provenance": recurrent_edited(lambda m, t: states(m)[0].update(call=None)),
        "recurrent_state_not_an_object": recurrent_edited(lambda m, t: m["recurrent_states"].update(target=[0] * 1000)),
        "recurrent_id_unknown": recurrent_edited(lambda m, t: before(m)[0][0].update(id=(1 << 63) - 1)),
        "recurrent_id_other_kind": recurrent_edited(lambda m, t: before(m)[0][0].update(id=1)),
        "recurrent_sequences": recurrent_edited(lambda m, t: before(m).pop()),
        "recurrent_entries_amplified": recurrent_edited(
            lambda m, t: before(m)[0].extend([{"layer": 0, "kind": "conv", "id": 0}] * 1000)),
        "recurrent_intermediate_count": recurrent_edited(lambda m, t: m["calls"][1]["recurrent"].update(
            intermediate=[[{"layer": 0, "kind": "conv", "ids": [0, 0]}], []])),
        "recurrent_in_version_2": edited(lambda m, t: m.update(recurrent_states={"target": recurrent_states()})),
    }


def with_reference(manifest, tensors, shape):
    """Call 1's logits with the engine's own reference rows of `shape` (docs/capture-format-v3.md)."""
    manifest["calls"][1]["logits"]["tensors"]["reference"] = "target.call1.reference_logits"
    tensors["target.call1.reference_logits"] = floats(shape)


def main():
    everything = hostile()
    everything.update(hostile_v2())
    everything.update(hostile_v3())
    everything.update(hostile_paged())  # paged pools (version 3)
    everything.update(hostile_recurrent())  # recurrent state (version 3)
    everything.update(hostile_v1())
    for name, data in everything.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
