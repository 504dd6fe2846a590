"""A tensor-parallel rank's part of a run (format version 3,
docs/capture-format-v3.md). Each rank records its own file: its cache holds
some of each model's KV heads, its calls, inputs and logits are the run's.
`kvscope-cli check RANK0 RANK1 ...` checks the files together as one run.

    Recorder(path, shard=(rank, ranks))
        every watched model's KV heads split evenly and contiguously over the
        ranks (rank r holds heads [r * h / ranks, (r + 1) * h / ranks)), the
        split Megatron-style tensor parallelism and vLLM use;
    Recorder(path, shard={"rank": r, "ranks": n, "kv_heads": {"target": (first, count), ...}})
        an engine that splits otherwise names each role's heads itself;
    Recorder(path, shard="torch.distributed")
        rank and ranks from the initialised default process group, split evenly."""
from dataclasses import dataclass, field

from .errors import CaptureError

MAX_RANKS = 1024


@dataclass
class Shard:
    rank: int
    ranks: int
    kv_heads: dict = field(default_factory=dict)  # role -> (first, count); filled per watched role if not given
    explicit: bool = False  # kv_heads given by the engine, not split evenly

    def resolve(self, role, model_kv_heads):
        """The (first, count) of `role`'s KV heads on this rank."""
        if role in self.kv_heads:
            first, count = self.kv_heads[role]
            if model_kv_heads is not None and first + count > model_kv_heads:
                raise ValueError(f"shard kv_heads for {role}: heads {first}..{first + count - 1} of a model with "
                                 f"{model_kv_heads}")
            return self.kv_heads[role]
        if self.explicit:
            raise ValueError(f"shard kv_heads names no range for the {role}")
        if model_kv_heads is None or model_kv_heads % self.ranks != 0:
            raise ValueError(f"the {role}'s {model_kv_heads} KV heads do not split evenly over {self.ranks} ranks: "
                             "pass shard={'rank': r, 'ranks': n, 'kv_heads': {role: (first, count)}}")
        count = model_kv_heads // self.ranks
        self.kv_heads[role] = (self.rank * count, count)
        return self.kv_heads[role]

    def check_rows(self, role, layer, kv_heads):
        first, count = self.kv_heads[role]
        if kv_heads != count:
            raise CaptureError(f"{role} layer {layer}: the cache holds {kv_heads} KV heads but this rank's shard "
                               f"holds {count} (heads {first}..{first + count - 1})")

    def json(self):
        return {"rank": self.rank, "ranks": self.ranks,
                "kv_heads": {role: list(heads) for role, heads in self.kv_heads.items()}}


def parse_shard(shard):
    """The Recorder's `shard` argument -> Shard, or None for a run on one process."""
    if shard is None:
        return None
    if shard == "torch.distributed":
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("shard='torch.distributed' needs an initialised default process group")
        return checked(Shard(dist.get_rank(), dist.get_world_size()))
    if isinstance(shard, (tuple, list)) and len(shard) == 2:
        return checked(Shard(int(shard[0]), int(shard[1])))
    if isinstance(shard, dict):
        heads = {}
        for role, pair in dict(shard.get("kv_heads") or {}).items():
            if role not in ("target", "drafter") or len(pair) != 2 or int(pair[0]) < 0 or int(pair[1]) < 1:
                raise ValueError(f"shard kv_heads[{role!r}] must be (first >= 0, count >= 1), not {pair!r}")
            heads[role] = (int(pair[0]), int(pair[1]))
        return checked(Shard(int(shard["rank"]), int(shard["ranks"]), heads, explicit=bool(heads)))
    raise ValueError(f"shard must be (rank, ranks), a dict with rank, ranks and kv_heads, or 'torch.distributed', "
                     f"not {shard!r}")


def checked(shard):
    if not 1 <= shard.ranks <= MAX_RANKS or not 0 <= shard.rank < shard.ranks:
        raise ValueError(f"shard rank {shard.rank} of {shard.ranks}: expected 0 <= rank < ranks <= {MAX_RANKS}")
    return shard
