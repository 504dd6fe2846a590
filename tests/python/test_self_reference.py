"""reference="self" (capture/python/kvscope_capture/self_reference.py): the
recorder computes each call's logits without a cache over the context its rows
claim, and kvscope-cli check compares the engine's logits with them when it
has no model of the family. The models here are the fixture pair under a
name no directory has, so check has no model of its own:
* a correct speculative loop, and a correct batched one, check clean with
  logit rows compared;
* an engine whose cached path rotates new keys one position early (a bug the
  bookkeeping cannot see: the positions it is given are right) is caught as a
  symptom at its first cached call, with no cache operation to blame;
* the recorded reference is the module's own uncached forward, checked here
  against the model called directly."""
import json
import os
import subprocess
import tempfile
import unittest

import torch

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import batched_loops
import kvscope_capture
import spec_loops
from check_captures import CLI
from fixtures import FIXTURES, pair_cases
from llama_ref import LlamaRef
from safetensors_io import read_tensors
from test_batched_capture import prompts

NEW_TOKENS = 16


def unknown(name):
    """The fixture model under a name that is no directory here: check has no model for it."""
    model = LlamaRef(os.path.join(FIXTURES, "models", name))
    model.config.name_or_path = "/nowhere/" + name
    return model


class EarlyRotaryCache(LlamaRef):
    """Rotates every input one position early once a cache holds rows: the
    positions it is given (and records) are right, the keys it writes are not."""

    def forward(self, input_ids, position_ids=None, past_key_values=None, **kwargs):
        past = past_key_values.get_seq_length() if past_key_values is not None else 0
        if past > 0:
            start = past if position_ids is None else position_ids
            position_ids = (torch.arange(past, past + input_ids.shape[1])[None] if position_ids is None else start) - 1
        return super().forward(input_ids, position_ids=position_ids, past_key_values=past_key_values, **kwargs)


def check(path):
    done = subprocess.run([CLI, "check", path, "--json"], capture_output=True, text=True, timeout=300)
    return done.returncode, (json.loads(done.stdout) if done.returncode in (0, 1) else done.stderr)


@unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
class SelfReference(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.directory.name, "self.kvcapture")
        self.prompt = pair_cases()[0]["ids"]

    def tearDown(self):
        self.directory.cleanup()

    def record(self, target, drafter, run):
        with kvscope_capture.Recorder(self.path, reference="self") as rec:
            rec.watch(target, role="target")
            if drafter is not None:
                rec.watch(drafter, role="drafter")
            rec.commit(run())

    def test_a_correct_loop_checks_clean_against_its_own_reference(self):
        target, drafter = unknown("llama-tiny"), unknown("llama-tiny-draft")
        self.record(target, drafter, lambda: spec_loops.speculative(target, drafter, self.prompt, NEW_TOKENS))
        code, report = check(self.path)
        self.assertEqual(code, 0, report)
        self.assertGreater(report["logit_rows_checked"], 0)
        self.assertEqual(report["rows_value_checked"], 0)  # no model: the rows' values are not compared
        self.assertTrue(any('reference=\"self\"' in note for note in report["notes"]), report["notes"])

    def test_a_correct_batch_checks_clean_against_its_own_reference(self):
        target, drafter = unknown("llama-tiny"), unknown("llama-tiny-draft")
        self.record(target, drafter,
                    lambda: batched_loops.batched_speculative(target, drafter, prompts(), 6, 2).sequences)
        code, report = check(self.path)
        self.assertEqual(code, 0, report)
        self.assertEqual(report["batch"], 3)
        self.assertGreater(report["logit_rows_checked"], 0)

    def test_a_cached_path_bug_is_a_symptom_at_the_first_cached_call(self):
        target = EarlyRotaryCache(os.path.join(FIXTURES, "models", "llama-tiny"))
        target.config.name_or_path = "/nowhere/llama-tiny"
        self.record(target, None, lambda: spec_loops.run_loop("greedy", target, None, self.prompt, NEW_TOKENS, "dynamic"))
        code, report = check(self.path)
        self.assertEqual(code, 1, report)
        self.assertIsNone(report["root_cause"])  # every cache operation kept the contract
        divergence = report["first_divergence"]
        self.assertEqual((divergence["role"], divergence["call"]), ("target", 1))  # call 0 ran without rows

    def test_the_reference_is_the_modules_uncached_forward(self):
        target = unknown("llama-tiny")
        self.record(target, None, lambda: spec_loops.run_loop("greedy", target, None, self.prompt, 4, "dynamic"))
        tensors, metadata = read_tensors(self.path)
        manifest = json.loads(metadata["kvscope_capture"])
        self.assertEqual(manifest["version"], 3)
        last = manifest["calls"][-1]
        reference = tensors[last["logits"]["tensors"]["reference"]]  # [1, rows, vocab]
        context = manifest["committed"][0][:last["positions"][0][-1] + 1]
        with torch.no_grad():
            expected = target(torch.tensor([context]), use_cache=False).logits[0, -reference.shape[1]:]
        self.assertTrue(torch.equal(reference[0], expected.float()))


if __name__ == "__main__":
    unittest.main()
