"""Recording a hybrid model's speculative run (tests/python/hybrid_engine.py):
the recorder's recurrent-state identities and provenance must name exactly
the loop's own first departure (never typed in), and nothing on the correct
loop, whose greedy output equals decoding without speculation.

The verdict is read off the file twice: by `kvscope-cli check --json` (the
one walker's root cause) and by recurrent_verdict.py, written from
docs/capture-format-v3.md, "Recurrent state"; both must name exactly the
loop's departure."""
import json
import os
import subprocess
import tempfile
import unittest

import torch

import kvscope_capture
from hybrid_engine import (BUGS, HybridLM, HybridMambaAttentionDynamicCache, LAYER_TYPES, drafter_of, greedy,
                           speculative)
from kvscope_capture.cache_views import read_cache
from kvscope_capture.recurrent import RecurrentStates
from recurrent_verdict import first_breach, load_manifest

PROMPT = [3, 17, 42, 5, 9, 11, 60, 2]
NEW_TOKENS = 24
NOISE = 0.1


class HybridRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.target = HybridLM()
        cls.drafter = drafter_of(cls.target, NOISE)
        cls.directory = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def record(self, name, bug=None, state_reader=None):
        path = os.path.join(self.directory.name, f"{name}.kvcapture")
        with kvscope_capture.Recorder(path) as rec:
            rec.watch(self.target, role="target", state_reader=state_reader)
            tokens, departure = speculative(self.target, self.drafter, PROMPT, NEW_TOKENS, bug=bug, recorder=rec)
        return path, tokens, departure

    def test_correct_loop_decodes_greedily_and_breaks_nothing(self):
        path, tokens, departure = self.record("correct")
        self.assertEqual(tokens, greedy(self.target, PROMPT, NEW_TOKENS))
        self.assertIsNone(departure)
        self.assertIsNone(first_breach(path))
        manifest = load_manifest(path)
        self.assertEqual(manifest["version"], 3)
        accepted_some = any(len(call.get("recurrent", {}).get("intermediate") or []) for call in manifest["calls"])
        self.assertTrue(accepted_some, "the verify calls' per-input states were not recorded")

    def test_each_bug_is_named_as_the_loop_saw_it(self):
        for bug in BUGS:
            with self.subTest(bug=bug):
                path, _, departure = self.record(bug, bug=bug)
                self.assertIsNotNone(departure, f"{bug}: the loop never departed; the run does not exercise it")
                breach = first_breach(path)
                self.assertIsNotNone(breach, f"{bug}: nothing named")
                for key in ("sequence", "role", "call", "operation", "layer", "state", "state_after",
                            "required_after"):
                    self.assertEqual(breach[key], departure[key], f"{bug}: {key} in {breach['what']}")

    def test_kept_state_holds_the_rejected_drafts(self):
        path, _, departure = self.record("kept", bug="not-restored")
        breach = first_breach(path)
        self.assertEqual(breach["rejected_drafts_of"], departure["call"] - 1)
        self.assertIn("rejected drafts", breach["what"])

    def test_a_reader_without_per_input_states_leaves_the_picked_state_unknown(self):
        def reader(module, arguments, output):
            cache = arguments.get("past_key_values") if output is None else output.past_key_values
            if cache is None:
                return None
            states = {(layer, kind): (cache.conv_states if kind == "conv" else cache.ssm_states)[layer]
                      for layer, t in enumerate(LAYER_TYPES) if t == "recurrent" for kind in ("conv", "ssm")}
            return RecurrentStates(states)
        # Without per-input states the state the rollback picked was never seen: no call computed it.
        explicit, _, departure = self.record("explicit", bug="shifted-snapshot", state_reader=reader)
        breach = first_breach(explicit)
        self.assertEqual((breach["call"], breach["layer"], breach["state"]),
                         (departure["call"], departure["layer"], departure["state"]))
        self.assertIsNone(breach["state_after"])
        self.assertIn("no recorded call computed", breach["what"])

    def check(self, path):
        cli = os.environ.get("KVSCOPE_CLI")
        if not cli:
            self.skipTest("KVSCOPE_CLI not set (run under CTest)")
        result = subprocess.run([cli, "check", path, "--json"], capture_output=True, text=True)
        self.assertNotIn("error", result.stderr, result.stderr)
        return result.returncode, json.loads(result.stdout)

    def test_check_passes_the_correct_loop(self):
        path, _, _ = self.record("cli-correct")
        code, report = self.check(path)
        self.assertEqual(code, 0, report.get("root_cause"))
        self.assertIsNone(report["root_cause"])

    def test_check_names_the_loops_own_departure(self):
        for bug in BUGS:
            with self.subTest(bug=bug):
                path, _, departure = self.record(f"cli-{bug}", bug=bug)
                code, report = self.check(path)
                self.assertNotEqual(code, 0)
                cause = report["root_cause"]
                self.assertEqual((cause["sequence"], cause["role"], cause["call"], cause["operation"], cause["kind"]),
                                 (departure["sequence"], departure["role"], departure["call"],
                                  departure["operation"], "state"), cause["what"])
                self.assertEqual((cause["layers"], cause["state"]), ([departure["layer"]], departure["state"]))
                self.assertEqual(cause["what"], first_breach(path)["what"])  # the spec's reading, word for word


class HybridCacheLayout(unittest.TestCase):
    """The recorder reads a hybrid cache's layers from its layout, not its class name."""

    def test_recurrent_layers_hold_no_rows_and_attention_layers_append(self):
        cache = HybridMambaAttentionDynamicCache(HybridLM().config)
        view = read_cache(cache)
        self.assertEqual([key is None for key in view.raw_keys], [t == "recurrent" for t in LAYER_TYPES])
        self.assertEqual(view.kinds, ["append"] * len(LAYER_TYPES))

    def test_a_buffer_as_long_as_max_cache_len_is_static_whatever_the_name(self):
        class HybridBuffers:
            max_cache_len = 8
            key_cache = [torch.zeros(1, 2, 8, 4), torch.zeros(1, 2, 3, 4)]
            value_cache = [torch.zeros(1, 2, 8, 4), torch.zeros(1, 2, 3, 4)]
        self.assertEqual(read_cache(HybridBuffers()).kinds, ["static", "append"])


if __name__ == "__main__":
    unittest.main()
