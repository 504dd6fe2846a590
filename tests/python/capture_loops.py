#!/usr/bin/env python3
"""Writes a .kvcapture of one of spec_loops' loops over the fixture models:

    capture_loops.py --loop NAME --cache SHAPE --out FILE.kvcapture [--greedy-tokens N]
                     [--gamma G] [--prompt once_upon_a_time|gpl_preamble] [--logits full|top_k:K]
                     [--bundled KVSCOPE_CLI]

Speculative loops run llama-tiny with llama-tiny-draft, the window loops
(greedy in the ring shape, window-roll-early) mistral-sw-tiny (sliding window
16) alone. --bundled runs a speculative loop over the bundled pair instead
(resources/models; "Once upon a time" tokenized by that kvscope-cli): real
text, for screenshots and docs. Prints one JSON line: the loop, the tokens and
the capture's size."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "capture", "python"))

import kvscope_capture  # noqa: E402
import spec_loops  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402

FIXTURES = os.path.join(REPO, "tests", "fixtures")
PROMPTS = ("once_upon_a_time", "gpl_preamble")
# bonus-not-fed shows only after a round that accepts every draft: with gamma 2 the
# once_upon_a_time prompt has one (and the drafter then feeds a draft where the bonus belongs).
DEFAULT_GAMMA = {"bonus-not-fed": 2}


def uses_window_model(loop, shape):
    return loop == "window-roll-early" or (loop == "greedy" and shape == "ring")


def models_for(loop, shape):
    """(target, drafter or None) reference models for a loop."""
    if uses_window_model(loop, shape):
        return LlamaRef(os.path.join(FIXTURES, "models", "mistral-sw-tiny")), None
    target = LlamaRef(os.path.join(FIXTURES, "models", "llama-tiny"))
    if loop == "greedy":
        return target, None
    return target, LlamaRef(os.path.join(FIXTURES, "models", "llama-tiny-draft"))


def prompt_ids(loop, shape, name):
    """The fixture's prompt ids (BOS included) for the model the loop runs."""
    fixture = "mistral-sw-tiny.json" if uses_window_model(loop, shape) else "llama-tiny+llama-tiny-draft.json"
    with open(os.path.join(FIXTURES, "greedy", fixture)) as f:
        cases = json.load(f)["cases"]
    return next(case["ids"] for case in cases if case["prompt_name"] == name)


def parse_logits(text):
    if text == "full":
        return "full"
    if text.startswith("top_k:"):
        return ("top_k", int(text.split(":", 1)[1]))
    raise argparse.ArgumentTypeError("--logits is full or top_k:K")


def bundled_models_and_prompt(loop, shape, cli):
    """The bundled pair and the ids of "Once upon a time" (BOS included) in its tokenizer."""
    if uses_window_model(loop, shape) or loop == "greedy":
        raise ValueError(f"--bundled runs the speculative loops; {loop} ({shape}) needs the fixtures")
    models = os.path.join(REPO, "resources", "models")
    done = subprocess.run([cli, "tokenize", "--text", "Once upon a time", "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError(f"{cli} tokenize failed: {done.stderr.strip()}")
    ids = json.loads(done.stdout.strip().splitlines()[-1])["ids"]
    return LlamaRef(os.path.join(models, "target")), LlamaRef(os.path.join(models, "drafter")), ids


def capture(loop, shape, out, new_tokens=48, gamma=None, prompt="once_upon_a_time", logits="full", bundled_cli=None,
            book=None):
    """Runs the loop under the recorder; returns (token ids, recorder). A cascade
    loop reports to `book` (spec_loops.run_loop)."""
    spec_loops.check_loop(loop, shape)
    gamma = DEFAULT_GAMMA.get(loop, 4) if gamma is None else gamma
    if bundled_cli:
        target, drafter, ids = bundled_models_and_prompt(loop, shape, bundled_cli)
    else:
        target, drafter = models_for(loop, shape)
        ids = prompt_ids(loop, shape, prompt)
    with kvscope_capture.Recorder(out, logits=logits, engine=f"kvscope tests/python spec_loops {loop} ({shape})") as rec:
        rec.watch(target, role="target")
        if drafter is not None:
            rec.watch(drafter, role="drafter")
        tokens = spec_loops.run_loop(loop, target, drafter, ids, new_tokens, shape, gamma, book)
        rec.commit(tokens)
    return tokens, rec


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loop", required=True, choices=sorted(spec_loops.LOOPS))
    parser.add_argument("--cache", required=True, choices=spec_loops.SHAPES)
    parser.add_argument("--out", required=True)
    parser.add_argument("--greedy-tokens", type=int, default=48)
    parser.add_argument("--gamma", type=int, default=None)
    parser.add_argument("--prompt", choices=PROMPTS, default="once_upon_a_time")
    parser.add_argument("--logits", type=parse_logits, default="full")
    parser.add_argument("--bundled", metavar="KVSCOPE_CLI", help="run over the bundled pair (tokenized by this CLI)")
    args = parser.parse_args()
    try:
        tokens, rec = capture(args.loop, args.cache, args.out, args.greedy_tokens, args.gamma, args.prompt, args.logits,
                              args.bundled)
    except (ValueError, kvscope_capture.CaptureError) as error:
        print(f"capture_loops.py: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"loop": args.loop, "cache": args.cache, "out": args.out, "tokens": tokens,
                      "calls": {role: watched.calls for role, watched in rec.roles.items()},
                      "bytes": rec.bytes_written}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
