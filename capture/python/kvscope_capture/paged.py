"""Paged KV pools (vLLM, SGLang, llama.cpp's cells): an engine that keeps K/V
in a shared block pool with a block table per sequence shows its cache to
the recorder through a `cache_reader` (docs/engine-captures.md, "A paged
engine"):

    rec.watch(model, role="target", cache_reader=read)

    def read(module, arguments, output):   # the watched call's arguments by name; its output, None before it
        return kvscope_capture.PagedCache(
            sequences=[kvscope_capture.PagedSequence(layers=[
                kvscope_capture.PagedLayer(keys, values, blocks=..., offsets=...)   # [kv_heads, n_b, head_dim]
                for each layer]) for each sequence],
            block_size=16, num_blocks=256, free_blocks=engine.free_list)

The reader is called before every watched call (output None) and after it
(output: what the call returned), and must not change the cache. Per sequence and layer it gives the rows the sequence
attends, in logical (position) order; where the engine has them, the block
id of each row (and its offset in the block, default: row index modulo
block_size), the pool's block count and its free list.

The recorder writes each layer as an "append" layer per sequence, the
shorter sequences padded at the front with padding slots (-2) so that every
sequence has the same slot count (format version 2's rule), and the blocks
as format version 3's `paged` field of the state (docs/capture-format-v3.md,
"Paged pools"): per layer and sequence the pool slot (block * block_size +
offset) of each slot, as runs."""
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from .cache_views import CacheView
from .errors import CaptureError
from .row_registry import PADDING, runs_of_list

MAX_BLOCK_SIZE = 1 << 16   # docs/capture-format-v3.md, "Paged pools": the format's bounds
MAX_POOL_SLOTS = 1 << 30   # block_size * num_blocks


@dataclass
class PagedLayer:
    keys: torch.Tensor                      # [kv_heads, n, head_dim], logical order
    values: torch.Tensor                    # [kv_heads, n, head_dim]
    blocks: Optional[Sequence[int]] = None  # per row, the block id holding it
    offsets: Optional[Sequence[int]] = None  # per row, its offset in the block (default: row % block_size)


@dataclass
class PagedSequence:
    layers: List[PagedLayer]


@dataclass
class PagedCache:
    sequences: List[PagedSequence]
    block_size: Optional[int] = None        # rows per block; required with blocks
    num_blocks: Optional[int] = None        # the pool's blocks; required with blocks
    free_blocks: Optional[Sequence[int]] = None  # the engine's free list, when it has one


@dataclass
class PagedView(CacheView):
    """A CacheView of a paged cache: per layer [B, kv_heads, slots, head_dim]
    with each sequence's rows right-aligned, and what a CacheView has not."""
    padding: torch.Tensor = None            # bool [B, slots], True on the front padding
    pool_slots: list = None                 # [layer][sequence] -> list of pool slots (-2 on padding), or None
    block_size: Optional[int] = None
    num_blocks: Optional[int] = None
    free_blocks: Optional[list] = None

    def paged_json(self):
        """The state's `paged` field, or None when the reader gave no blocks."""
        if self.pool_slots is None:
            return None
        return {"block_size": self.block_size, "num_blocks": self.num_blocks,
                "layers": [[runs_of_list(slots) for slots in layer] for layer in self.pool_slots],
                "free": None if self.free_blocks is None else runs_of_list(self.free_blocks)}


def read_paged(reader, module, arguments, output, batch):
    """Calls the engine's reader -> PagedView, or None when it gives None."""
    cache = reader(module, arguments, output)
    if cache is None:
        return None
    sequences = getattr(cache, "sequences", None)
    if not isinstance(sequences, (list, tuple)) or len(sequences) != batch:
        raise CaptureError(f"cache_reader gave {describe_count(sequences)} sequences for a call of {batch}")
    layer_count = len(sequences[0].layers)
    if any(len(sequence.layers) != layer_count for sequence in sequences):
        raise CaptureError("cache_reader: the sequences have different numbers of layers")
    lengths = [sequence_length(sequence, b) for b, sequence in enumerate(sequences)]
    slots = max(lengths)
    has_blocks = any(layer.blocks is not None for sequence in sequences for layer in sequence.layers)
    if has_blocks:
        check_pool(cache)
    keys, values, pool = [], [], [] if has_blocks else None
    for layer in range(layer_count):
        rows = [sequences[b].layers[layer] for b in range(batch)]
        if slots == 0:  # no sequence holds a row yet: a layer never written
            keys.append(None)
            values.append(None)
            if has_blocks:
                pool.append([[] for _ in range(batch)])
            continue
        keys.append(right_aligned([row.keys for row in rows], slots, f"layer {layer} keys"))
        values.append(right_aligned([row.values for row in rows], slots, f"layer {layer} values"))
        if has_blocks:
            pool.append([pool_slots(row, cache, slots, f"layer {layer} sequence {b}") for b, row in enumerate(rows)])
    padding = torch.arange(slots)[None, :] < torch.tensor([slots - n for n in lengths])[:, None]  # [B, slots]
    free = None
    if has_blocks and cache.free_blocks is not None:
        # A block on the free list twice is the engine's state to show, not the recorder's to refuse.
        free = sorted({block_id(block, cache.num_blocks, "free_blocks") for block in cache.free_blocks})
    return PagedView(type(cache).__name__, None, keys, values, ["append"] * layer_count, padding=padding,
                     pool_slots=pool, block_size=cache.block_size if has_blocks else None,
                     num_blocks=cache.num_blocks if has_blocks else None, free_blocks=free)


def describe_count(sequences):
    return len(sequences) if isinstance(sequences, (list, tuple)) else f"no list of ({type(sequences).__name__})"


def sequence_length(sequence, b):
    """The rows of sequence b, the same in every layer."""
    counts = set()
    for layer, rows in enumerate(sequence.layers):
        if not isinstance(rows.keys, torch.Tensor) or rows.keys.dim() != 3:
            raise CaptureError(f"cache_reader: sequence {b} layer {layer} keys must be [kv_heads, n, head_dim]")
        if rows.values.shape[:2] != rows.keys.shape[:2]:
            raise CaptureError(f"cache_reader: sequence {b} layer {layer}: keys {list(rows.keys.shape)} but values "
                               f"{list(rows.values.shape)}")
        counts.add(int(rows.keys.shape[1]))
    if len(counts) > 1:
        raise CaptureError(f"cache_reader: sequence {b} holds {sorted(counts)} rows in different layers")
    return counts.pop() if counts else 0


def right_aligned(tensors, slots, what):
    """Per sequence [kv_heads, n_b, head_dim] -> [B, kv_heads, slots, head_dim],
    zeros in front of the shorter sequences (padding slots, never stored)."""
    first = tensors[0]
    out = first.new_zeros((len(tensors), first.shape[0], slots, first.shape[2]))
    for b, rows in enumerate(tensors):
        if rows.shape[0] != first.shape[0] or rows.shape[2] != first.shape[2] or rows.dtype != first.dtype:
            raise CaptureError(f"cache_reader {what}: sequence {b} rows {list(rows.shape)} {rows.dtype}, sequence 0 "
                               f"{list(first.shape)} {first.dtype}")
        if rows.shape[1]:
            out[b, :, slots - rows.shape[1]:] = rows.detach().to(first.device)
    return out


def check_pool(cache):
    for name, limit in (("block_size", MAX_BLOCK_SIZE), ("num_blocks", MAX_POOL_SLOTS)):
        value = getattr(cache, name, None)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
            raise CaptureError(f"cache_reader gave blocks, so {name} must be an integer in [1, {limit}], "
                               f"not {value!r}")
    if cache.block_size * cache.num_blocks > MAX_POOL_SLOTS:
        raise CaptureError(f"cache_reader: a pool of {cache.num_blocks} blocks of {cache.block_size} rows is more "
                           f"than {MAX_POOL_SLOTS} rows")


def block_id(block, num_blocks, what):
    block = int(block)
    if not 0 <= block < num_blocks:
        raise CaptureError(f"cache_reader: {what} names block {block}, outside the pool's {num_blocks} blocks")
    return block


def pool_slots(rows, cache, slots, what):
    """The pool slot (block * block_size + offset) of each of the `slots` slots
    of one sequence's layer, PADDING in front of its rows."""
    n = int(rows.keys.shape[1])
    if rows.blocks is None:
        raise CaptureError(f"cache_reader {what}: no blocks where other sequences or layers give them")
    blocks = [block_id(block, cache.num_blocks, what) for block in rows.blocks]
    offsets = [int(offset) for offset in rows.offsets] if rows.offsets is not None \
        else [i % cache.block_size for i in range(n)]
    if len(blocks) != n or len(offsets) != n:
        raise CaptureError(f"cache_reader {what}: {len(blocks)} blocks and {len(offsets)} offsets for {n} rows")
    if any(not 0 <= offset < cache.block_size for offset in offsets):
        raise CaptureError(f"cache_reader {what}: an offset outside the block size {cache.block_size}")
    placed = [block * cache.block_size + offset for block, offset in zip(blocks, offsets)]
    # Two rows at one block and offset are the engine's state (a block mapped twice), not refused.
    return [PADDING] * (slots - n) + placed
