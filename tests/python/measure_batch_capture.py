#!/usr/bin/env python3
"""Measures what recording costs a batched engine at a real model size, for
docs/engine-captures.md:

    build/app/kvscope-cli make-model --shape qwen2.5-0.5b --dtype bf16 --out /tmp/qwen-0.5b
    OMP_NUM_THREADS=1 /usr/bin/python3 tests/python/measure_batch_capture.py --model /tmp/qwen-0.5b \\
        [--batch 4] [--new-tokens 256] [--trials 3]

The engine is batched_loops.batched_greedy (left padding, a 2-D padding mask,
position_ids per sequence, a DynamicCache [B, kv_heads, slots, head_dim]) over
the tests' PyTorch reference model in bfloat16 (weights, activations and
cache; random weights of the given shape: the cost does not depend on their
values). Prompts: B random prompts of different lengths (16, 24, 32, 12 ...).
Interleaved trials of the run alone, under kvscope_capture's Recorder with
top-20 logits, and with full logits; one warm-up run first. Each is timed as
wall time and as this process's CPU time (one thread: the CPU time is what
the work cost, whatever else the shared machine runs meanwhile). Prints every
sample, medians, ratios to the run alone and the capture sizes as one JSON line."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "capture", "python"))

import batched_loops  # noqa: E402
import kvscope_capture  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402

PROMPT_LENGTHS = (16, 24, 32, 12, 20, 28, 8, 36)
MODES = {"top_k_20": ("top_k", 20), "full": "full"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a checkpoint directory (kvscope-cli make-model --out)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    model = LlamaRef(args.model, dtype=torch.bfloat16)
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prompts = [torch.randint(1, vocab, (PROMPT_LENGTHS[b % len(PROMPT_LENGTHS)],), generator=generator).tolist()
               for b in range(args.batch)]

    def run():
        return batched_loops.batched_greedy(model, prompts, args.new_tokens)

    def recorded(path, logits):
        with kvscope_capture.Recorder(path, logits=logits, engine="measure_batch_capture.py") as rec:
            rec.watch(model, role="target")
            rec.commit(run().sequences)
        return rec

    samples = {"run": [], **{mode: [] for mode in MODES}}
    cpu = {name: [] for name in samples}
    sizes, calls = {}, None
    with torch.no_grad(), tempfile.TemporaryDirectory() as directory:
        run()  # warm-up: allocator, first-call paths
        for _ in range(args.trials):
            started, started_cpu = time.perf_counter(), time.process_time()
            run()
            samples["run"].append(time.perf_counter() - started)
            cpu["run"].append(time.process_time() - started_cpu)
            for mode, logits in MODES.items():
                path = os.path.join(directory, mode + ".kvcapture")
                started, started_cpu = time.perf_counter(), time.process_time()
                rec = recorded(path, logits)
                samples[mode].append(time.perf_counter() - started)
                cpu[mode].append(time.process_time() - started_cpu)
                sizes[mode] = os.path.getsize(path)
                calls = rec.roles["target"].calls
                os.remove(path)
    median = {name: statistics.median(values) for name, values in samples.items()}
    median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    config = model.config
    print(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "model": {"layers": config.num_hidden_layers, "hidden": config.hidden_size,
                                                     "kv_heads": config.num_key_value_heads, "vocab": vocab,
                                                     "dtype": "bfloat16"},
        "batch": args.batch, "prompt_lengths": [len(p) for p in prompts], "new_tokens": args.new_tokens,
        "calls": calls, "trials": args.trials, "threads": torch.get_num_threads(),
        "wall_seconds": samples, "cpu_seconds": cpu, "median_wall_seconds": median, "median_cpu_seconds": median_cpu,
        "wall_recorded_over_run": {mode: median[mode] / median["run"] for mode in MODES},
        "cpu_recorded_over_run": {mode: median_cpu[mode] / median_cpu["run"] for mode in MODES}, "bytes": sizes,
    }))


if __name__ == "__main__":
    main()
