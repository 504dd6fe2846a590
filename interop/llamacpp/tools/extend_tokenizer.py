#!/usr/bin/env python3
"""Gives a random-weight model (kvscope-cli make-model writes none) a tokenizer of
exactly its vocabulary size, so llama.cpp can load its GGUF: the bundled byte-level
BPE tokenizer, extended by merges of its tokens with single bytes until it holds
--size tokens. The text it produces means nothing; speed runs use --prompt-ids.

    python3 interop/llamacpp/tools/extend_tokenizer.py --size 151936 /tmp/q05 /tmp/q05-draft
"""
import argparse
import json
import pathlib
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
BUNDLED = HERE.parents[2] / "resources" / "models" / "target"


def extended(tokenizer, size):
    vocab = tokenizer["model"]["vocab"]
    merges = tokenizer["model"]["merges"]
    special = {t["content"] for t in tokenizer["added_tokens"]}
    ordinary = [token for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if token not in special]
    single_bytes = ordinary[:256]  # byte-level BPE: ids 0-255 are the bytes
    next_id = max(vocab.values()) + 1
    for left in ordinary:
        for right in single_bytes:
            if next_id == size:
                return tokenizer
            if left + right in vocab:
                continue
            vocab[left + right] = next_id
            merges.append(f"{left} {right}")
            next_id += 1
    raise ValueError(f"cannot reach {size} tokens from the bundled tokenizer")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, required=True, help="tokens (the model's vocab_size)")
    parser.add_argument("dirs", nargs="+", help="model directories to write tokenizer.json into")
    args = parser.parse_args()
    base = json.loads((BUNDLED / "tokenizer.json").read_text())
    if not len(base["model"]["vocab"]) < args.size <= 4_000_000:
        sys.exit(f"--size must be above {len(base['model']['vocab'])} and at most 4000000, got {args.size}")
    tokenizer = extended(base, args.size)
    for d in args.dirs:
        out = pathlib.Path(d)
        if not (out / "config.json").is_file():
            sys.exit(f"{out} holds no config.json")
        (out / "tokenizer.json").write_text(json.dumps(tokenizer))
        shutil.copy(BUNDLED / "tokenizer_config.json", out / "tokenizer_config.json")
    print(f"{len(tokenizer['model']['vocab'])} tokens written to {', '.join(args.dirs)}")


if __name__ == "__main__":
    main()
