"""A hand-written engine module that the recorder cannot identify (no
`config`, no get_input_embeddings(), no embedding parameter it knows): the
capture holds no fingerprint, so `check` can match a checkpoint by its shape
only. It must say so in a note, and when the checkpoint given is another one
of the same shape (every row the target's first call wrote then differs), add
that the checkpoint may not be the one the engine ran
(docs/engine-captures.md#how-kvscope-knows-your-model)."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import torch

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import kvscope_capture
from check_captures import CLI
from fixtures import FIXTURES, pair_cases
from kvscope_capture.safetensors_writer import write_safetensors
from llama_ref import LlamaRef
from safetensors_io import read_tensors

FINGERPRINT_NOTE = "no weights fingerprint of the target"
WRONG_CHECKPOINT_NOTE = "the checkpoint may not be the one the engine ran"


class HandWritten(torch.nn.Module):
    """How a user writes an engine's model by hand: a plain module around the
    math, with no config attribute and its weights in a dict of its own."""

    def __init__(self, model_dir):
        super().__init__()
        self.math = LlamaRef(model_dir)

    def forward(self, input_ids, past_key_values=None):
        return self.math(input_ids, past_key_values=past_key_values)


def greedy_decode(model, prompt, new_tokens):
    """The engine's loop as its user writes it: legacy tuple caches, one token at a time."""
    ids = list(prompt)
    past = None
    with torch.no_grad():
        fed = torch.tensor([ids])
        for _ in range(new_tokens):
            out = model(fed, past_key_values=past)
            past = out.past_key_values
            ids.append(int(out.logits[0, -1].argmax()))
            fed = torch.tensor([[ids[-1]]])
    return ids


class PassThrough(torch.nn.Module):
    """A wrapper whose forward takes *args, **kwargs: the token ids arrive as
    its first positional argument."""

    def __init__(self, model_dir):
        super().__init__()
        self.inner = HandWritten(model_dir)

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


def perturbed_copy(model_dir, into):
    """The same architecture with other weights: a checkpoint that is not the engine's."""
    os.makedirs(into)
    shutil.copy(os.path.join(model_dir, "config.json"), into)
    tensors, _ = read_tensors(os.path.join(model_dir, "model.safetensors"))
    generator = torch.Generator().manual_seed(7)
    moved = {name: (t.float() + 0.05 * torch.randn(t.shape, generator=generator)).to(t.dtype) if t.is_floating_point() else t
             for name, t in tensors.items()}
    write_safetensors(os.path.join(into, "model.safetensors"), moved, {"format": "pt"})


def check(path, target):
    done = subprocess.run([CLI, "check", path, "--target", target, "--json"], capture_output=True, text=True, timeout=300)
    return done.returncode, (json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode in (0, 1) else done.stderr)


@unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
class HandWrittenModule(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.model_dir = os.path.join(FIXTURES, "models", "llama-tiny")
        cls.path = os.path.join(cls.directory.name, "hand.kvcapture")
        target = HandWritten(cls.model_dir)
        prompt = pair_cases()[0]["ids"]
        with kvscope_capture.Recorder(cls.path) as rec:
            rec.watch(target, role="target")
            rec.commit(greedy_decode(target, prompt, 8))
        cls.wrong_dir = os.path.join(cls.directory.name, "other-llama-tiny")
        perturbed_copy(cls.model_dir, cls.wrong_dir)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_a_pass_through_forward_is_recorded_by_its_first_argument(self):
        path = os.path.join(self.directory.name, "pass-through.kvcapture")
        target = PassThrough(self.model_dir)
        with kvscope_capture.Recorder(path) as rec:
            rec.watch(target, role="target")
            rec.commit(greedy_decode(target, pair_cases()[0]["ids"], 4))
        code, report = check(path, self.model_dir)
        self.assertEqual(code, 0, report)

    def test_the_capture_has_no_fingerprint(self):
        _, metadata = read_tensors(self.path)
        manifest = json.loads(metadata["kvscope_capture"])
        self.assertIsNone(manifest["models"]["target"]["fingerprint"])

    def test_the_right_checkpoint_checks_clean_and_says_the_match_was_by_shape(self):
        code, report = check(self.path, self.model_dir)
        self.assertEqual(code, 0, report)
        self.assertTrue(any(FINGERPRINT_NOTE in note for note in report["notes"]), report["notes"])
        self.assertFalse(any(WRONG_CHECKPOINT_NOTE in note for note in report["notes"]), report["notes"])

    def test_another_checkpoint_of_the_same_shape_is_named_as_a_likely_cause(self):
        code, report = check(self.path, self.wrong_dir)
        self.assertEqual(code, 1, report)
        cause = report["root_cause"]
        self.assertEqual((cause["role"], cause["call"], cause["kind"]), ("target", 0, "values"), cause)
        self.assertTrue(any(FINGERPRINT_NOTE in note for note in report["notes"]), report["notes"])
        self.assertTrue(any(WRONG_CHECKPOINT_NOTE in note for note in report["notes"]), report["notes"])


if __name__ == "__main__":
    unittest.main()
