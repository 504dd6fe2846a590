#!/usr/bin/env python3
"""Measures a capture of the bundled pair and its check, for docs/engine-captures.md:

    OMP_NUM_THREADS=1 /usr/bin/python3 tests/python/measure_capture.py --cli build/app/kvscope-cli [--trials 3]

Runs spec_loops' correct greedy speculative loop (gamma 4, DynamicCache) of 48
new tokens over resources/models/target and resources/models/drafter with the
tests' PyTorch reference model, in interleaved trials: the run alone (inside
this process, and as a process of its own: python, imports, model loading, the
run), the run under kvscope_capture's Recorder (full logits, then top-20), and
`kvscope-cli check` of the capture (a process: libtorch start-up, two models
loaded, the check). Prints medians and ratios as one JSON line.
`--run-only` runs the loop once and exits (the process timed above)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "capture", "python"))

import kvscope_capture  # noqa: E402
import spec_loops  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402

MODELS = os.path.join(REPO, "resources", "models")
PROMPT = "Once upon a time"


def prompt_ids(cli):
    done = subprocess.run([cli, "tokenize", "--text", PROMPT, "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["ids"]


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True, help="the kvscope-cli binary")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--run-only", action="store_true")
    parser.add_argument("--prompt-ids", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    target, drafter = LlamaRef(os.path.join(MODELS, "target")), LlamaRef(os.path.join(MODELS, "drafter"))
    ids = [int(i) for i in args.prompt_ids.split(",")] if args.prompt_ids else prompt_ids(args.cli)

    def run():
        return spec_loops.speculative(target, drafter, ids, args.new_tokens, 4, "dynamic")

    if args.run_only:
        run()
        return
    run_process = [sys.executable, os.path.abspath(__file__), "--cli", args.cli, "--run-only",
                   "--new-tokens", str(args.new_tokens), "--prompt-ids", ",".join(map(str, ids))]

    def recorded(path, logits):
        with kvscope_capture.Recorder(path, logits=logits, engine="measure_capture.py") as rec:
            rec.watch(target, role="target")
            rec.watch(drafter, role="drafter")
            rec.commit(run())
        return rec

    samples = {"run": [], "run_process": [], "recorded": [], "check_wall": [], "check_inside": []}
    with tempfile.TemporaryDirectory() as directory:
        full, top = os.path.join(directory, "full.kvcapture"), os.path.join(directory, "top.kvcapture")
        run()  # warm-up: allocator, first-call paths
        for _ in range(args.trials):
            samples["run"].append(timed(run)[0])
            samples["run_process"].append(timed(lambda: subprocess.run(run_process, check=True))[0])
            seconds, rec = timed(lambda: recorded(full, "full"))
            samples["recorded"].append(seconds)
            seconds, done = timed(lambda: subprocess.run([args.cli, "check", full, "--json"], capture_output=True,
                                                          text=True))
            if done.returncode != 0:
                sys.exit(f"check failed ({done.returncode}): {done.stderr}{done.stdout}")
            samples["check_wall"].append(seconds)
            samples["check_inside"].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
        recorded(top, ("top_k", 20))
        calls = {role: watched.calls for role, watched in rec.roles.items()}
        sizes = {"full": os.path.getsize(full), "top_k_20": os.path.getsize(top)}
    median = {name: statistics.median(values) for name, values in samples.items()}
    print(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "prompt": PROMPT, "new_tokens": args.new_tokens, "calls": calls,
        "bytes": sizes, "trials": args.trials, "median_seconds": median,
        "recorder_overhead": median["recorded"] / median["run"],
        "check_process_over_run_process": median["check_wall"] / median["run_process"],
        "check_inside_over_run": median["check_inside"] / median["run"],
    }))


if __name__ == "__main__":
    main()
