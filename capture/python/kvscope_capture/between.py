"""The recorder's reading of what changed in a role's cache between two of
its calls (the `between` hint). Informational only: readers derive the change
from the two states themselves."""


def layer_change(previous, current, same_object):
    """previous, current: row ids per slot (-1 empty) of one layer -> a kind."""
    if previous == current:
        return "none"
    held = [row for row in current if row >= 0]
    if not held and any(row >= 0 for row in previous):
        return "reset"
    if len(current) < len(previous) and current == previous[:len(current)]:
        return "crop" if same_object else "slice"
    previous_rows = set(row for row in previous if row >= 0)
    if len(current) < len(previous) and is_subsequence(held, [row for row in previous if row >= 0]):
        return "slice"
    if set(held) <= previous_rows:
        return "roll" if len(current) == len(previous) else "slice"
    if len(current) == len(previous):
        return "overwrite"
    return "replace"


def is_subsequence(short, long):
    remaining = iter(long)
    return all(any(row == candidate for candidate in remaining) for row in short)


def describe_change(previous_state, current_state, same_object):
    """Per-layer id lists of two states (None: no cache) -> {"kind", "layers", "what"}.
    same_object: the cache object of both states is the same one (not tuples)."""
    if previous_state is None:
        if current_state is None or not any(count_rows(ids) for ids in current_state):
            return {"kind": "none", "layers": [], "what": "no cache before, none with rows now"}
        return {"kind": "replace", "layers": list(range(len(current_state))),
                "what": "the previous call returned no cache; this one got a cache with rows"}
    if current_state is None:
        return {"kind": "reset", "layers": list(range(len(previous_state))), "what": "the call got no cache"}
    kinds = [layer_change(p, c, same_object) for p, c in zip(previous_state, current_state)]
    changed = [layer for layer, kind in enumerate(kinds) if kind != "none"]
    if len(previous_state) != len(current_state):
        return {"kind": "replace", "layers": changed, "what": "the number of layers changed"}
    if not changed:
        return {"kind": "none", "layers": [], "what": "unchanged"}
    kind = kinds[changed[0]]
    first = changed[0]
    what = (f"layer {first}: {count_rows(previous_state[first])} -> {count_rows(current_state[first])} rows "
            f"in {len(previous_state[first])} -> {len(current_state[first])} slots")
    if any(kinds[layer] != kind for layer in changed):
        what += "; other layers: " + ", ".join(f"{layer} {kinds[layer]}" for layer in changed[1:])
    return {"kind": kind, "layers": changed, "what": what}


def count_rows(ids):
    return sum(1 for row in ids if row >= 0)
