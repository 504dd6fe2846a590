"""kvscope-cli check on tensor-parallel runs (CTest python_sharded): the
engine of tp_engine.py on two processes (torch.distributed, gloo, a file
rendezvous), each rank recording its own capture of the bundled pair.

* The correct engine commits the target's greedy decoding and checks clean
  as one run, and each rank's file alone checks clean as the shard it is.
* Each bug lives in one rank's KV manager; check's root cause must be that
  rank's first departure from the engine's books (rank, role, call, step,
  kind), found by the engine itself, never typed in here.
* A rank's rows read as the whole model's are refused, naming both shapes;
  a set with a rank missing or repeated is refused."""
import json
import os
import subprocess
import tempfile
import unittest

import torch.multiprocessing as mp

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import tp_engine
from check_captures import CLI
from fixtures import REPO
from llama_ref import LlamaRef

RANKS = 2
NEW_TOKENS = 40
MODELS = (os.path.join(REPO, "resources", "models", "target"), os.path.join(REPO, "resources", "models", "drafter"))
# Two prompts, so that a bug is seen in two runs; tokenized by the bundled tokenizer (BOS first).
TEXTS = {"once": "Once upon a time, a little girl", "short": "The dog"}
PROMPTS = {}


def tokenize(text):
    done = subprocess.run([CLI, "tokenize", "--text", text, "--json"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{CLI} tokenize failed: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])["ids"]


def run_ranks(directory, prompt, bug=None, bug_rank=1):
    """Runs the engine on RANKS processes over the bundled pair; returns per rank its books (committed, departure)."""
    return run_ranks_of(directory, MODELS, prompt, NEW_TOKENS, bug, bug_rank)


def run_ranks_of(directory, models, prompt, new_tokens, bug=None, bug_rank=1):
    rendezvous = os.path.join(directory, "rendezvous")
    mp.start_processes(tp_engine.run_rank, args=(RANKS, rendezvous, directory, models, prompt, new_tokens, bug,
                                                 bug_rank), nprocs=RANKS, start_method="spawn")
    books = []
    for rank in range(RANKS):
        with open(os.path.join(directory, f"rank{rank}.json")) as f:
            books.append(json.load(f))
    return books


def check(*paths, extra=()):
    done = subprocess.run([CLI, "check", *paths, "--json", *extra], capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout) if done.returncode in (0, 1) else None
    return done.returncode, report, done.stderr


def greedy(prompt, new_tokens):
    """The bundled target's greedy decoding, one process, no tensor parallelism."""
    import torch
    model = LlamaRef(MODELS[0])
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            ids.append(int(model(torch.tensor([ids]), use_cache=False).logits[0, -1].argmax()))
    return ids


@unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
class TensorParallelRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.runs = {}
        for name, text in TEXTS.items():
            PROMPTS[name] = tokenize(text)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def run_of(self, prompt, bug=None, bug_rank=1):
        """(rank capture paths, books) of one run, made once per class."""
        key = (prompt, bug, bug_rank)
        if key not in self.runs:
            directory = os.path.join(self.directory.name, "-".join(str(part) for part in key))
            os.makedirs(directory)
            books = run_ranks(directory, PROMPTS[prompt], bug, bug_rank)
            paths = [os.path.join(directory, f"rank{rank}.kvcapture") for rank in range(RANKS)]
            self.runs[key] = (paths, books)
        return self.runs[key]

    def test_the_correct_engine_is_greedy_decoding_and_checks_clean(self):
        for prompt in PROMPTS:
            paths, books = self.run_of(prompt)
            self.assertTrue(all(book["departure"] is None for book in books))
            self.assertEqual(books[0]["committed"], books[1]["committed"])
            self.assertEqual(books[0]["committed"], greedy(PROMPTS[prompt], NEW_TOKENS), prompt)
            code, report, stderr = check(*paths)
            self.assertEqual(code, 0, (prompt, report, stderr))
            self.assertEqual([rank["ok"] for rank in report["ranks"]], [True] * RANKS)
            self.assertGreater(report["rows_value_checked"], 0)

    def test_each_rank_alone_checks_as_its_shard(self):
        paths, _ = self.run_of("once")
        for rank, path in enumerate(paths):
            code, report, stderr = check(path)
            self.assertEqual(code, 0, (rank, report, stderr))
            self.assertIn(f"rank {rank} of {RANKS}", report["shard"])
            self.assertGreater(report["rows_value_checked"], 0)

    def test_the_files_may_come_in_any_order(self):
        paths, _ = self.run_of("once", "rank-keeps-rejected")
        forward, backward = check(*paths), check(*reversed(paths))
        self.assertEqual(forward[1]["root_cause"], backward[1]["root_cause"])

    def test_each_bug_is_named_by_rank_role_call_and_step(self):
        departing_ranks = set()
        for bug in tp_engine.BUGS:
            for prompt in PROMPTS:
                for bug_rank in range(RANKS):
                    with self.subTest(bug=bug, prompt=prompt, rank=bug_rank):
                        paths, books = self.run_of(prompt, bug, bug_rank)
                        departures = [book["departure"] for book in books if book["departure"]]
                        self.assertEqual(len(departures), 1, books)  # only the buggy rank's books depart
                        expected = departures[0]
                        departing_ranks.add(expected["rank"])
                        code, report, stderr = check(*paths)
                        self.assertEqual(code, 1, stderr)
                        cause = report["root_cause"]
                        got = {"rank": cause["rank"], "sequence": cause["sequence"], "role": cause["role"],
                               "call": cause["call"], "step": cause["step"], "kind": cause["kind"]}
                        self.assertEqual(got, expected, cause["what"])
                        self.assertTrue(cause["what"].startswith(f"rank {expected['rank']}: "), cause["what"])
                        broken = [rank["rank"] for rank in report["ranks"] if not rank["ok"]]
                        self.assertIn(expected["rank"], broken)
        self.assertEqual(departing_ranks, set(range(RANKS)))  # the verdict follows the rank, not a constant

    def test_a_ranks_rows_read_as_the_whole_models_are_refused(self):
        """The rank's file with its shard taken out: rows of 1 KV head against a
        config of 2. Before the check knew shards this gave a false values breach."""
        paths, _ = self.run_of("once")
        stripped = os.path.join(self.directory.name, "no-shard.kvcapture")
        strip_shard(paths[1], stripped)
        code, report, stderr = check(stripped)
        self.assertEqual(code, 2, report)
        self.assertIn("rows hold 1 KV head", stderr)
        self.assertIn("num_key_value_heads is 2", stderr)

    def test_a_set_missing_or_repeating_a_rank_is_refused(self):
        paths, _ = self.run_of("once")
        code, _, stderr = check(paths[0], paths[0])
        self.assertEqual(code, 2)
        self.assertIn("rank 0 again", stderr)
        other, _ = self.run_of("short")
        code, _, stderr = check(paths[0], other[1])
        self.assertEqual(code, 2)
        self.assertIn("not a rank of the same run", stderr)


def strip_shard(source, destination):
    """Rewrites a capture as version 2 without its shard (what a recorder that
    did not know it ran on one rank would have written), byte for byte else."""
    from kvscope_capture.safetensors_writer import write_safetensors
    from safetensors_io import read_tensors
    tensors, metadata = read_tensors(source)
    manifest = json.loads(metadata["kvscope_capture"])
    del manifest["shard"]
    manifest["version"] = 2
    metadata = dict(metadata, version="2", kvscope_capture=json.dumps(manifest))
    write_safetensors(destination, tensors, metadata)


if __name__ == "__main__":
    unittest.main()
