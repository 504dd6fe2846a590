"""A small cache-contract check over a capture, for the tests (the real one is
kvscope-cli check): each row's identity (token, position) comes from the call
whose inputs wrote it; at every call of append or static caches, the rows the
call attends to plus its inputs must be positions 0, 1, 2, ... with no gap or
repeat, and the target's must hold the committed tokens."""


def written_rows(capture, role, layer=0):
    """row id -> (token, position, call index) for rows a call's inputs wrote."""
    identity = {}
    for call in capture.calls(role):
        after = call["after_ids"][layer] if call["after_ids"] else []
        before = call["before_ids"][layer] if call["before_ids"] else []
        kind = call["after"]["kinds"][layer] if call["after"] else "append"
        for slot, row in enumerate(after):
            if row < 0 or row in identity or (slot < len(before) and before[slot] == row):
                continue
            index = input_written_at(call, kind, slot, len(before))
            if index is not None:
                identity[row] = (call["input_ids"][index], call["positions"][index], call["index"])
    return identity


def input_written_at(call, kind, slot, before_slots):
    """The input index an append or static cache writes to `slot`, or None."""
    if kind == "append":
        index = slot - before_slots
        return index if 0 <= index < len(call["input_ids"]) else None
    if kind == "static":
        limits = call["cache_position"] or call["positions"]
        return limits.index(slot) if slot in limits else None
    return None


def attended_rows(call, layer=0):
    """Row ids the call attends to besides its inputs (None for an empty slot)."""
    before = call["before_ids"][layer] if call["before_ids"] else []
    kind = call["before"]["kinds"][layer] if call["before"] else "append"
    if kind == "static":
        start = (call["cache_position"] or call["positions"])[0]
        before = before[:start]
    return [row if row >= 0 else None for row in before]


def breaches(capture, role, layer=0):
    """[(call index, what)] where the contract fails, in call order."""
    identity = written_rows(capture, role, layer)
    committed = capture.manifest["committed"]
    found = []
    for call in capture.calls(role):
        rows = attended_rows(call, layer)
        if any(row is None or row not in identity for row in rows):
            found.append((call["index"], "attends an empty slot or a row no call wrote"))
            continue
        pairs = [identity[row][:2] for row in rows] + list(zip(call["input_ids"], call["positions"]))
        if [position for _, position in pairs] != list(range(len(pairs))):
            found.append((call["index"], "positions have a gap or a repeat"))
        elif role == "target" and committed is not None and any(
                position < len(committed) and token != committed[position] for token, position in pairs[:len(rows) + 1]):
            found.append((call["index"], "a row or the first input is not the committed token at its position"))
    return found
