"""Writes tests/fixtures/captures/tp-rank0.kvcapture and tp-rank1.kvcapture:
tp_engine.py's tensor-parallel speculative engine on two gloo processes over
the fixture pair (llama-tiny, llama-tiny-draft; 2 KV heads, one per rank),
with the rank-keeps-rejected bug in rank 1, 12 new tokens. The GUI's tests
open the pair as one run (tests/ui/sequence_picker_test.cpp).

    OMP_NUM_THREADS=1 /usr/bin/python3 tests/python/make_rank_fixtures.py"""
import json
import os
import shutil
import tempfile

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
from check_sharded import run_ranks_of
from fixtures import FIXTURES, pair_cases

MODELS = (os.path.join(FIXTURES, "models", "llama-tiny"), os.path.join(FIXTURES, "models", "llama-tiny-draft"))


def main():
    with tempfile.TemporaryDirectory() as directory:
        books = run_ranks_of(directory, MODELS, pair_cases()[0]["ids"], 12, "rank-keeps-rejected", 1)
        for rank in range(2):
            shutil.copy(os.path.join(directory, f"rank{rank}.kvcapture"),
                        os.path.join(FIXTURES, "captures", f"tp-rank{rank}.kvcapture"))
    print(json.dumps([book["departure"] for book in books]))


if __name__ == "__main__":
    main()
