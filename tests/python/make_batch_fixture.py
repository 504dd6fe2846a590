"""Writes tests/fixtures/captures/uniform-advance-batch3-topk.kvcapture: the
batched speculative loop of batched_loops.py with its uniform-advance bug on
the fixture pair (llama-tiny, llama-tiny-draft), three prompts of different
lengths, 6 new tokens, gamma 2, top-4 logits. The GUI's tests open it
(tests/ui/sequence_picker_test.cpp).

    OMP_NUM_THREADS=1 /usr/bin/python3 tests/python/make_batch_fixture.py"""
import os

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import batched_loops
import kvscope_capture
from fixtures import FIXTURES, model
from test_batched_capture import prompts

OUT = os.path.join(FIXTURES, "captures", "uniform-advance-batch3-topk.kvcapture")


def main():
    target, drafter = model("llama-tiny"), model("llama-tiny-draft")
    with kvscope_capture.Recorder(OUT, logits=("top_k", 4), engine="kvscope tests/python batched_loops uniform-advance") as rec:
        rec.watch(target, role="target")
        rec.watch(drafter, role="drafter")
        run = batched_loops.batched_speculative(target, drafter, prompts(), 6, 2, bug="uniform-advance")
        rec.commit(run.sequences)
    print(f"wrote {OUT}: departure {run.departure}")


if __name__ == "__main__":
    main()
