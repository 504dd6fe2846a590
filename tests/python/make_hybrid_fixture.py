"""Writes tests/fixtures/captures/hybrid-shifted-snapshot.kvcapture:
hybrid_engine.py's speculative loop over its seeded hybrid model (recurrent and
attention layers alternating) with the `shifted-snapshot` rollback bug (the
state kept after a verify is input a + 1's), 24 new tokens. The GUI's
Recurrent States panel test opens it (tests/ui/recurrent_states_test.cpp).

    OMP_NUM_THREADS=1 /usr/bin/python3 tests/python/make_hybrid_fixture.py"""
import json
import os

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import kvscope_capture
from fixtures import FIXTURES
from hybrid_engine import HybridLM, drafter_of, speculative

PROMPT = [3, 17, 42, 5, 9, 11, 60, 2]
NEW_TOKENS = 24
NOISE = 0.1


def main():
    target = HybridLM()
    drafter = drafter_of(target, NOISE)
    path = os.path.join(FIXTURES, "captures", "hybrid-shifted-snapshot.kvcapture")
    with kvscope_capture.Recorder(path) as rec:
        rec.watch(target, role="target")
        _, departure = speculative(target, drafter, PROMPT, NEW_TOKENS, bug="shifted-snapshot", recorder=rec)
    print(json.dumps(departure))


if __name__ == "__main__":
    main()
