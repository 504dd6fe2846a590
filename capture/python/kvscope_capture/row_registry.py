"""Row identity. Every distinct K/V row a role's cache layer ever holds is
stored once and gets an id (0, 1, 2, ... per role and layer, in the order the
recorder first sees it). A cache state is then, per layer, the row id in each
physical slot (-1 for an empty slot).

Two slots hold the same row when their K and V are bitwise equal. A 64-bit
integer fingerprint of each slot's bits (a fixed pseudo-random linear
combination, exact and independent of the tensor's shape) finds candidates
vectorised; every candidate is then confirmed by comparing the bits."""
import torch

from .errors import CaptureError

EMPTY = -1
UNRESOLVED = -2
FINGERPRINT_SEED = 0x6B7673636F7065  # "kvscope"


def bits(tensor):
    """A float tensor's bit patterns as integers of the same width (float64 as int32 pairs)."""
    width = tensor.element_size()
    return tensor.contiguous().view(torch.int16 if width == 2 else torch.int32)


def slot_bits(tensor):
    """[kv_heads, slots, head_dim] -> int64 [slots, kv_heads * head_dim (* 2 for float64)]."""
    return bits(tensor).transpose(0, 1).reshape(tensor.shape[1], -1).long()


class Fingerprinter:
    """Per-slot fingerprint: sum of each bit pattern times a fixed weight in
    [1, 2^16). |bits| < 2^31, so each term is < 2^47 and a slot of up to 2^14
    values sums exactly in int64, whatever the order."""

    def __init__(self):
        self.weights = {}

    def weights_for(self, width):
        if width not in self.weights:
            generator = torch.Generator().manual_seed(FINGERPRINT_SEED + width)
            self.weights[width] = torch.randint(1, 1 << 16, (width,), generator=generator, dtype=torch.int64)
        return self.weights[width]

    def __call__(self, keys, values):
        """keys, values [kv_heads, slots, head_dim] -> int64 [slots]."""
        key_bits, value_bits = slot_bits(keys), slot_bits(values)
        if key_bits.shape[1] + value_bits.shape[1] > (1 << 14):
            raise CaptureError("a cache slot holds more than 16384 values: too wide to fingerprint exactly")
        return (key_bits * self.weights_for(key_bits.shape[1])).sum(1) + \
            (value_bits * self.weights_for(value_bits.shape[1]) * 3).sum(1)


class LayerRows:
    """The rows of one role's layer: growable keys / values [kv_heads, capacity,
    head_dim] in the cache's dtype, and each row's fingerprint."""

    def __init__(self, layer):
        self.layer = layer
        self.count = 0
        self.keys = None
        self.values = None
        self.fingerprints = torch.empty(0, dtype=torch.int64)

    def check_compatible(self, keys, values):
        if self.keys is None:
            return
        if keys.dtype != self.keys.dtype or values.dtype != self.values.dtype:
            raise CaptureError(f"layer {self.layer}: the cache's dtype changed from {self.keys.dtype} to {keys.dtype}")
        if keys.shape[0] != self.keys.shape[0] or keys.shape[2] != self.keys.shape[2] \
                or values.shape[0] != self.values.shape[0] or values.shape[2] != self.values.shape[2]:
            raise CaptureError(f"layer {self.layer}: rows of shape {list(keys.shape)} after {list(self.keys.shape)}")

    def grow(self, needed):
        capacity = self.keys.shape[1]
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity)
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((old.shape[0], capacity, old.shape[2]))
            new[:, :self.count] = old[:, :self.count]
            setattr(self, name, new)
        fingerprints = self.fingerprints.new_zeros(capacity)
        fingerprints[:self.count] = self.fingerprints[:self.count]
        self.fingerprints = fingerprints

    def add(self, keys, values, fingerprints):
        """Stores m new rows (keys, values [kv_heads, m, head_dim]); returns the first new id."""
        self.check_compatible(keys, values)
        if self.keys is None:
            self.keys = keys.new_zeros((keys.shape[0], 0, keys.shape[2]))
            self.values = values.new_zeros((values.shape[0], 0, values.shape[2]))
        first = self.count
        self.grow(first + keys.shape[1])
        self.keys[:, first:first + keys.shape[1]] = keys
        self.values[:, first:first + keys.shape[1]] = values
        self.fingerprints[first:first + keys.shape[1]] = fingerprints
        self.count += keys.shape[1]
        return first

    def equal_rows(self, ids, keys, values):
        """bool [m]: stored row ids[i] has exactly the bits of slot i of keys / values."""
        same_keys = (slot_bits(self.keys[:, ids]) == slot_bits(keys)).all(1)
        return same_keys & (slot_bits(self.values[:, ids]) == slot_bits(values)).all(1)

    def stored(self):
        """(keys, values) [kv_heads, count, head_dim]."""
        return self.keys[:, :self.count], self.values[:, :self.count]


def empty_slots(keys, values, kind):
    """bool [slots]: slots of a fixed buffer that were never written (all-zero K and V)."""
    if kind == "append":
        return torch.zeros(keys.shape[1], dtype=torch.bool)
    return ~((slot_bits(keys) != 0).any(1) | (slot_bits(values) != 0).any(1))


def assign_ids(rows, fingerprinter, keys, values, empty, reference):
    """Row ids for the slots of one layer (keys, values [kv_heads, slots, head_dim]),
    given the state it evolved from (`reference`: the ids of its slots). A slot
    keeps the id of the reference's row in the same slot when the bits are
    equal, else takes the id of another reference row with the same bits that
    no other slot holds (a row moved by a roll or a slice), else is a new row.
    So an id appears at most once in a state. Returns int64 [slots]."""
    slots = keys.shape[1]
    fingerprints = fingerprinter(keys, values)  # [slots]
    ids = torch.full((slots,), UNRESOLVED, dtype=torch.int64)
    ids[empty] = EMPTY
    reference = torch.as_tensor(reference, dtype=torch.int64)
    keep_in_place(rows, ids, fingerprints, keys, values, reference[:slots])
    take_moved_rows(rows, ids, fingerprints, keys, values, reference)
    new = (ids == UNRESOLVED).nonzero()[:, 0]
    if len(new):
        first = rows.add(keys[:, new], values[:, new], fingerprints[new])
        ids[new] = torch.arange(first, first + len(new))
    return ids


def keep_in_place(rows, ids, fingerprints, keys, values, reference):
    overlap = len(reference)
    if overlap == 0:
        return
    candidates = (reference >= 0) & (ids[:overlap] == UNRESOLVED)
    candidates &= rows.fingerprints[reference.clamp(min=0)] == fingerprints[:overlap]
    slots = candidates.nonzero()[:, 0]
    if len(slots):
        same = rows.equal_rows(reference[slots], keys[:, slots], values[:, slots])
        ids[slots[same]] = reference[slots[same]]


def take_moved_rows(rows, ids, fingerprints, keys, values, reference):
    pending = (ids == UNRESOLVED).nonzero()[:, 0]
    if len(pending) == 0 or len(reference) == 0:
        return
    unused = reference[(reference >= 0) & ~torch.isin(reference, ids[ids >= 0])]
    if len(unused) == 0:
        return
    pending = pending[torch.isin(fingerprints[pending], rows.fingerprints[unused])]
    by_fingerprint = {}
    for row in unused.tolist():
        by_fingerprint.setdefault(int(rows.fingerprints[row]), []).append(row)
    for slot in pending.tolist():
        candidates = by_fingerprint.get(int(fingerprints[slot]), [])
        for row in candidates:
            if bool(rows.equal_rows(torch.tensor([row]), keys[:, slot:slot + 1], values[:, slot:slot + 1])[0]):
                ids[slot] = row
                candidates.remove(row)
                break


def runs(ids):
    """int64 [slots] -> [[first_row_id, count], ...]: consecutive ids in one run,
    empty slots as [-1, count]."""
    slots = len(ids)
    if slots == 0:
        return []
    empty = ids < 0
    starts_run = torch.ones(slots, dtype=torch.bool)
    starts_run[1:] = (empty[1:] != empty[:-1]) | (~empty[1:] & (ids[1:] != ids[:-1] + 1))
    starts = starts_run.nonzero()[:, 0]
    lengths = torch.diff(starts, append=torch.tensor([slots]))
    firsts = torch.where(empty[starts], torch.full_like(starts, EMPTY), ids[starts])
    return [[first, length] for first, length in zip(firsts.tolist(), lengths.tolist())]
