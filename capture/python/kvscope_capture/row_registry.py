"""Row identity. Every distinct K/V row a role's cache layer ever holds is
stored once and gets an id (0, 1, 2, ... per role and layer, in the order the
recorder first sees it). A cache state is then, per layer, the row id in each
physical slot (-1 for an empty slot, -2 for a padding slot of a batched run:
one the call's 2-D attention mask masks for that sequence).

Two slots hold the same row when their K and V are bitwise equal. A state
keeps its slots' bits, so the next state is compared with it slot by slot in
one vectorised comparison; rows that moved (a roll, a slice) are found through
a 64-bit integer fingerprint of their bits and confirmed bit for bit."""
from dataclasses import dataclass

import torch

from .errors import CaptureError

EMPTY = -1
PADDING = -2
UNRESOLVED = -3
FINGERPRINT_SEED = 0x6B7673636F7065  # "kvscope"


def slot_bits(keys, values):
    """keys, values [kv_heads, slots, head_dim] -> their bit patterns as integers
    of the same width (float64 as int32 pairs), [slots, kv_heads * (head_dim_k + head_dim_v)].
    A fresh copy: the cache may be overwritten in place later."""
    if keys.dtype != values.dtype:
        raise CaptureError(f"keys are {keys.dtype} but values {values.dtype}")
    both = torch.cat([keys, values], dim=-1)  # [kv_heads, slots, head_dim_k + head_dim_v]
    as_int = both.view(torch.int16 if both.element_size() == 2 else torch.int32)
    return as_int.transpose(0, 1).reshape(keys.shape[1], -1)


@dataclass
class LayerState:
    ids: torch.Tensor   # int64 [slots], -1 for an empty slot, -2 for a padding slot
    bits: torch.Tensor  # [slots, width] the slots' bit patterns
    source: object = None  # TensorSource of the cache tensors read, if they can be recognised later

    _id_list: list = None
    _runs: list = None

    @staticmethod
    def empty():
        return LayerState(torch.empty(0, dtype=torch.int64), torch.empty(0, 0, dtype=torch.int32))

    def id_list(self):
        if self._id_list is None:
            self._id_list = self.ids.tolist()
        return self._id_list

    def runs(self):
        if self._runs is None:
            self._runs = runs(self.ids) if len(self.ids) > 512 else runs_of_list(self.id_list())
        return self._runs

    def prefix(self, slots, source):
        """The state of the first `slots` slots (after a crop), runs cut in Python."""
        kept = LayerState(self.ids[:slots], self.bits[:slots], source)
        kept._id_list = self.id_list()[:slots]
        kept._runs = []
        remaining = slots
        for first, count in self.runs():
            if remaining == 0:
                break
            kept._runs.append([first, min(count, remaining)])
            remaining -= kept._runs[-1][1]
        return kept


class TensorSource:
    """Recognises a cache's keys / values tensors at the next read without reading
    their slots again. PyTorch bumps a tensor's version counter (shared by its
    views) on every in-place write, so the same tensor objects, or views of
    them that keep their first slots (a crop, a slice [..., :n, :]), at the same
    versions hold the same bits. The tensors are held (not copied) until the
    role's next state is read, so their memory cannot be reused meanwhile."""

    def __init__(self, keys, values):
        self.tensors = (keys, values)
        self.versions = (version_of(keys), version_of(values))

    def kept_slots(self, keys, values):
        """The number of leading slots `keys, values` share with the tensors read
        before, unchanged; None when that cannot be told without reading them."""
        if None in self.versions:
            return None
        kept = [prefix_length(new, old, version) for new, old, version
                in zip((keys, values), self.tensors, self.versions)]
        return kept[0] if kept[0] is not None and kept[0] == kept[1] else None


def prefix_length(new, old, version):
    if new is old:
        return new.shape[-2] if version_of(new) == version else None
    if getattr(new, "_base", None) is not old or version_of(new) != version:
        return None
    same_layout = new.data_ptr() == old.data_ptr() and new.stride() == old.stride() and new.dim() == 4
    if same_layout and new.shape[:2] == old.shape[:2] and new.shape[3] == old.shape[3] and new.shape[2] <= old.shape[2]:
        return new.shape[2]
    return None


def version_of(tensor):
    try:
        return tensor._version
    except (AttributeError, RuntimeError):  # inference tensors have no version counter
        return None


class Fingerprinter:
    """Per-slot fingerprint: the sum of each bit pattern (|bits| < 2^31) times a
    fixed pseudo-random weight below 2^w, w chosen per slot width so that the
    sum stays below 2^62: exact in int64, whatever the order of the additions.
    Equal bits give equal fingerprints; equal fingerprints are then confirmed
    bit for bit."""

    def __init__(self):
        self.weights = {}

    def __call__(self, bits):
        """[slots, width] -> int64 [slots]."""
        width = bits.shape[1]
        if width not in self.weights:
            weight_bits = min(16, 62 - 31 - width.bit_length())
            if weight_bits < 1:
                raise CaptureError(f"a cache slot holds {width} values: too wide to fingerprint")
            generator = torch.Generator().manual_seed(FINGERPRINT_SEED + width)
            self.weights[width] = torch.randint(1, 1 << weight_bits, (width,), generator=generator, dtype=torch.int64)
        return (bits.long() * self.weights[width]).sum(1)


class LayerRows:
    """The rows of one role's layer: growable keys / values [kv_heads, capacity,
    head_dim] in the cache's dtype."""

    def __init__(self, layer):
        self.layer = layer
        self.count = 0
        self.keys = None
        self.values = None

    def check_compatible(self, keys, values):
        if self.keys is None:
            return
        if keys.dtype != self.keys.dtype:
            raise CaptureError(f"layer {self.layer}: the cache's dtype changed from {self.keys.dtype} to {keys.dtype}")
        if keys.shape[0] != self.keys.shape[0] or keys.shape[2] != self.keys.shape[2] \
                or values.shape[2] != self.values.shape[2]:
            raise CaptureError(f"layer {self.layer}: rows of shape {list(keys.shape)} after {list(self.keys.shape)}")

    def grow(self, needed):
        capacity = self.keys.shape[1]
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity, 64)
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((old.shape[0], capacity, old.shape[2]))
            new[:, :self.count] = old[:, :self.count]
            setattr(self, name, new)

    def add(self, keys, values):
        """Stores m new rows (keys, values [kv_heads, m, head_dim]); returns the first new id."""
        self.check_compatible(keys, values)
        if self.keys is None:
            self.keys = keys.new_zeros((keys.shape[0], 0, keys.shape[2]))
            self.values = values.new_zeros((values.shape[0], 0, values.shape[2]))
        first, added = self.count, keys.shape[1]
        self.grow(first + added)
        self.keys[:, first:first + added] = keys
        self.values[:, first:first + added] = values
        self.count += added
        return first

    def stored(self):
        """(keys, values) [kv_heads, count, head_dim]."""
        if self.keys is None:
            return None
        return self.keys[:, :self.count], self.values[:, :self.count]


def assign_ids(rows, fingerprinter, keys, values, kind, reference, padding=None):
    """The LayerState of one layer (keys, values [kv_heads, slots, head_dim]) given
    the state it evolved from. A slot keeps the id of the reference's row in the
    same slot when the bits are equal; else it takes the id of another reference
    row with the same bits that no other slot holds (a row moved by a roll or a
    slice); else it is a new row, stored now. So an id appears at most once in a
    state. Slots of a fixed buffer ("static", "ring") whose K and V are all zero
    were never written: empty. padding (bool [slots], or None): slots the call's
    2-D mask masks for this sequence of a batch; their bits are not rows of the
    sequence and are not stored."""
    bits = slot_bits(keys, values)  # [slots, width]
    slots = bits.shape[0]
    no_padding = padding is None or not bool(padding.any())
    if kind == "append" and no_padding and grows_reference(bits, reference):
        # The common case, appended rows: every reference slot unchanged, new rows after them.
        kept = len(reference.ids)
        first = rows.add(keys[:, kept:], values[:, kept:]) if slots > kept else rows.count
        ids = torch.cat([reference.ids, torch.arange(first, first + slots - kept)])
        return LayerState(ids, bits)
    ids = torch.full((slots,), UNRESOLVED, dtype=torch.int64)
    if not no_padding:
        ids[padding] = PADDING
    if kind != "append":
        ids[(bits == 0).all(1)] = EMPTY
    kept = keep_in_place(ids, bits, reference)
    take_moved_rows(fingerprinter, ids, bits, reference, kept)
    new = (ids == UNRESOLVED).nonzero()[:, 0]
    if len(new):
        first = rows.add(keys[:, new], values[:, new])
        ids[new] = torch.arange(first, first + len(new))
    return LayerState(ids, bits)


def grows_reference(bits, reference):
    """True when the slots start with exactly the reference's slots, all rows."""
    held = len(reference.ids)
    if held > bits.shape[0] or (held and reference.bits.shape[1] != bits.shape[1]):
        return False
    return held == 0 or (bool((reference.ids >= 0).all()) and torch.equal(bits[:held], reference.bits))


def keep_in_place(ids, bits, reference):
    """Gives each slot whose bits equal the reference's same slot that slot's id.
    Returns bool [reference slots]: the reference rows kept in place."""
    kept = torch.zeros(len(reference.ids), dtype=torch.bool)
    overlap = min(len(ids), len(reference.ids))
    if overlap == 0 or reference.bits.shape[1] != bits.shape[1]:
        return kept
    previous = reference.ids[:overlap]
    kept[:overlap] = (bits[:overlap] == reference.bits[:overlap]).all(1) & (previous >= 0) \
        & (ids[:overlap] == UNRESOLVED)
    ids[:overlap] = torch.where(kept[:overlap], previous, ids[:overlap])
    return kept


def take_moved_rows(fingerprinter, ids, bits, reference, kept):
    """Gives a slot not kept in place the id of a reference row with the same bits
    that no slot holds yet."""
    if len(reference.ids) == 0 or reference.bits.shape[1] != bits.shape[1]:
        return
    unused = ((reference.ids >= 0) & ~kept).nonzero()[:, 0]
    pending = (ids == UNRESOLVED).nonzero()[:, 0]
    if len(unused) == 0 or len(pending) == 0:
        return
    by_fingerprint = {}
    for slot, fingerprint in zip(unused.tolist(), fingerprinter(reference.bits[unused]).tolist()):
        by_fingerprint.setdefault(fingerprint, []).append(slot)
    for slot, fingerprint in zip(pending.tolist(), fingerprinter(bits[pending]).tolist()):
        candidates = by_fingerprint.get(fingerprint, [])
        for reference_slot in candidates:
            if torch.equal(bits[slot], reference.bits[reference_slot]):
                ids[slot] = reference.ids[reference_slot]
                candidates.remove(reference_slot)
                break


def runs_of_list(ids):
    """runs() for a Python list, faster for short states."""
    encoded = []
    for row in ids:
        if encoded:
            last = encoded[-1]
            if (row < 0 and last[0] == row) or (row >= 0 and last[0] >= 0 and row == last[0] + last[1]):
                last[1] += 1
                continue
        encoded.append([row, 1])
    return encoded


def runs(ids):
    """int64 [slots] row ids -> [[first_row_id, count], ...]: consecutive ids in
    one run, empty slots as [-1, count], padding slots as [-2, count]."""
    slots = len(ids)
    if slots == 0:
        return []
    negative = ids < 0
    starts_run = torch.ones(slots, dtype=torch.bool)
    starts_run[1:] = (negative[1:] != negative[:-1]) | (negative[1:] & (ids[1:] != ids[:-1])) \
        | (~negative[1:] & (ids[1:] != ids[:-1] + 1))
    starts = starts_run.nonzero()[:, 0]
    counts = torch.diff(starts, append=torch.tensor([slots]))
    return torch.stack([ids[starts], counts], 1).tolist()
