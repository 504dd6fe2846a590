#!/usr/bin/env python3
"""Measures recording and checking at real size, for docs/performance.md
("Recording and checking at real size") and docs/engine-captures.md:

    /usr/bin/python3 tests/python/measure_capture_real.py --cli build/app/kvscope-cli \\
        --target /tmp/q05 --drafter /tmp/q05-draft [--trials 3] [--threads 2]

The target is the Qwen2.5-0.5B shape (`kvscope-cli make-model --shape qwen2.5-0.5b
--dtype bf16 --out /tmp/q05`), loaded the way transformers' from_pretrained loads a
bf16 checkpoint by default (float32) into the tests' PyTorch reference model
(llama_ref.py); the drafter a smaller random checkpoint of the same vocabulary.
Two runs, each a 100-token prompt and 16 new tokens, greedy, `--threads` threads:

  plain        the target alone, the prompt in one call, then one token per call
  speculative  spec_loops' correct speculative loop with the drafter, gamma 4

In interleaved trials (plain alone, plain recorded, check, plain as a process, speculative
alone, speculative recorded, check, speculative as a process), each timed: the run alone inside this process; the
run under kvscope_capture's Recorder with top-20 logits (watch() to the file
written, the models' embedding fingerprints included, as a process recording
one run pays them; `fingerprints` times them alone); `kvscope-cli check` of that capture as a process of its own (its wall
time, the `seconds` it reports, its peak RSS from /usr/bin/time); and the engine as a
process of its own (`engine_process`: Python started, torch imported, the models
loaded, the run), the like of `check` as a process. Prints medians and ratios as one
JSON line."""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "capture", "python"))

import torch  # noqa: E402

import kvscope_capture  # noqa: E402
from kvscope_capture import model_info  # noqa: E402
import spec_loops  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402
from measured_process import run_measured  # noqa: E402

PROMPT_TOKENS = 100
GAMMA = 4
TOP_K = 20


def prompt_ids(vocab, count):
    """`count` ids spread over the vocabulary: a random model has no tokenizer
    worth using, and a fixed prompt makes every trial the same work."""
    return [(13 + 7919 * i) % vocab for i in range(count)]


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def check_capture(cli, capture, scratch, threads):
    """(wall seconds, the seconds check reports, peak RSS MB, its JSON report) of
    `kvscope-cli check`. The peak is /usr/bin/time's (%M, from wait4 on its own
    small child): wait4 on a child forked from this process counts the pages it
    shared with this process (the models held here) before its exec."""
    env = dict(os.environ, KVSCOPE_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    peak_file = scratch / "peak.txt"
    argv = ["/usr/bin/time", "-f", "%M", "-o", str(peak_file), cli, "check", capture, "--json"]
    started = time.perf_counter()
    measured = run_measured(argv, scratch, env, timeout_s=600)
    wall = time.perf_counter() - started
    if measured is None:
        sys.exit(f"check of {capture} gave no answer within 600 s")
    status, out, err = measured[:3]
    if status != 0:
        sys.exit(f"check of {capture} failed ({status}): {err.decode()}{out.decode()}")
    report = json.loads(out.decode().strip().splitlines()[-1])
    return wall, report["seconds"], int(peak_file.read_text().split()[-1]) / 1024.0, report


def engine_process_seconds(args, name):
    """Wall seconds of this script as the engine alone (`--just-run NAME`): a
    process that starts, imports torch, loads its models and runs once, as
    `check` starts, loads and checks."""
    argv = [sys.executable, os.path.abspath(__file__), "--cli", args.cli, "--target", args.target,
            "--drafter", args.drafter, "--threads", str(args.threads), "--new-tokens", str(args.new_tokens),
            "--just-run", name]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"the engine alone ({name}) failed: {done.stderr.decode()}")
    return time.perf_counter() - started


def embedding_fingerprint_seconds(model):
    """What watch() pays for a model whose embedding it has not fingerprinted in this process."""
    return timed(lambda: model_info.fingerprint_sums(model.get_input_embeddings().weight))[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True, help="the kvscope-cli binary")
    parser.add_argument("--target", required=True, help="the 0.5 B shape's directory")
    parser.add_argument("--drafter", required=True, help="a smaller checkpoint of the same vocabulary")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--runs", default="plain,speculative")
    parser.add_argument("--just-run", help="load the models, run this once and exit (timed by the parent)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target = LlamaRef(args.target)
    if args.just_run == "plain":  # the engine alone loads only what its run uses
        spec_loops.greedy(target, prompt_ids(target.config.vocab_size, PROMPT_TOKENS), args.new_tokens)
        return
    drafter = LlamaRef(args.drafter)
    if target.config.vocab_size != drafter.config.vocab_size:
        sys.exit(f"the drafter's vocabulary ({drafter.config.vocab_size}) is not the target's "
                 f"({target.config.vocab_size})")
    ids = prompt_ids(target.config.vocab_size, PROMPT_TOKENS)
    loops = {
        "plain": lambda: spec_loops.greedy(target, ids, args.new_tokens),
        "speculative": lambda: spec_loops.speculative(target, drafter, ids, args.new_tokens, GAMMA, "dynamic"),
    }
    runs = args.runs.split(",")
    for name in runs + ([args.just_run] if args.just_run else []):
        if name not in loops:
            sys.exit(f"unknown run {name!r}; plain, speculative")
    if args.just_run:
        loops[args.just_run]()
        return

    def recorded(name, path):
        # Each recording pays the fingerprint of every model it watches, as a
        # process recording one run does: the recorder's own cache of them
        # (model_info) would make every trial after the first cheaper.
        model_info.forget_fingerprints()
        with kvscope_capture.Recorder(path, logits=("top_k", TOP_K), engine="measure_capture_real.py") as rec:
            rec.watch(target, role="target")
            if name == "speculative":
                rec.watch(drafter, role="drafter")
            rec.commit(loops[name]())
        return rec

    measures = ("run", "engine_process", "recorded", "fingerprints", "check_wall", "check_inside", "check_peak_mb")
    samples = {name: {measure: [] for measure in measures} for name in runs}
    facts = {}
    with tempfile.TemporaryDirectory() as directory:
        scratch = pathlib.Path(directory)
        for name in runs:
            loops[name]()  # warm-up: allocator, first-call paths
        for trial in range(args.trials):
            for name in runs:
                s = samples[name]
                s["run"].append(timed(loops[name])[0])
                capture = os.path.join(directory, f"{name}.kvcapture")
                seconds, rec = timed(lambda: recorded(name, capture))
                s["recorded"].append(seconds)
                s["fingerprints"].append(sum(embedding_fingerprint_seconds(model) for model
                                             in ([target, drafter] if name == "speculative" else [target])))
                wall, inside, peak, report = check_capture(args.cli, capture, scratch, args.threads)
                s["check_wall"].append(wall)
                s["check_inside"].append(inside)
                s["check_peak_mb"].append(peak)
                # Last: its 2 GB of float32 weights would leave the runs above a colder machine.
                s["engine_process"].append(engine_process_seconds(args, name))
                facts[name] = {"calls": {role: watched.calls for role, watched in rec.roles.items()},
                               "bytes": os.path.getsize(capture), "verdict": report.get("verdict"),
                               "exit": 0}
            # Each trial's figures as they come: a run cut short on a loaded machine still says something.
            print(json.dumps({"trial": trial + 1, "of": args.trials, "load": os.getloadavg(),
                              "samples": {name: {m: v[-1] for m, v in samples[name].items()} for name in runs}}),
                  file=sys.stderr, flush=True)
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "target": args.target,
           "drafter": args.drafter, "prompt_tokens": PROMPT_TOKENS, "new_tokens": args.new_tokens,
           "threads": args.threads, "logits": f"top_{TOP_K}", "trials": args.trials, "load": os.getloadavg()}
    for name in runs:
        median = {measure: statistics.median(values) for measure, values in samples[name].items()}
        out[name] = dict(facts[name], median=median, raw=samples[name],
                         recorder_overhead=median["recorded"] / median["run"],
                         check_wall_over_run=median["check_wall"] / median["run"],
                         check_wall_over_engine_process=median["check_wall"] / median["engine_process"],
                         check_inside_over_run=median["check_inside"] / median["run"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
