"""kvscope-cli check on captures of spec_loops' loops (run by CTest as
python_check, with KVSCOPE_CLI naming the binary): every correct loop in every
cache shape is clean (exit 0); every buggy loop is a breach (exit 1) whose root
cause names the role, call, operation and kind the bug really is, found here
from the capture itself, not from the checker; unusable files and checkpoints
that are not the captured ones exit 2."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import spec_loops  # noqa: E402
from capture_loops import capture  # noqa: E402
from capture_reader import Capture  # noqa: E402

CLI = os.environ.get("KVSCOPE_CLI", "")
MODELS = os.path.join(fixtures.FIXTURES, "models")


def run_check(path, *options):
    """(exit code, the JSON result or None, stderr)."""
    done = subprocess.run([CLI, "check", path, "--json", *options], capture_output=True, text=True, timeout=600)
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else None, done.stderr


@unittest.skipUnless(CLI, "KVSCOPE_CLI is not set (CTest sets it)")
class CheckCaptures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.made = {}

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def capture(self, loop, shape, **options):
        """(path, Capture) of one loop, made once per test class."""
        key = (loop, shape, tuple(sorted(options.items())))
        if key not in self.made:
            path = os.path.join(self.directory.name, f"{loop}-{shape}-{len(self.made)}.kvcapture")
            capture(loop, shape, path, **options)
            self.made[key] = (path, Capture(path))
        return self.made[key]

    def breach(self, loop, shape, **options):
        path, c = self.capture(loop, shape, **options)
        code, result, stderr = run_check(path)
        self.assertEqual(code, 1, f"{loop} ({shape}): {stderr}{result}")
        self.assertFalse(result["ok"])
        self.assertIsNotNone(result["root_cause"], result)
        return result["root_cause"], result, c

    def assertCause(self, cause, role, call, operation, kind):
        self.assertEqual((cause["role"], cause["call"], cause["step"], cause["kind"]),
                         (role, call, operation, kind), cause["what"])

    @staticmethod
    def first_rejecting_verify(c):
        """(target call, n accepted, L) of the first verify that rejected a draft."""
        committed = c.manifest["committed"]
        for call in c.calls("target")[1:]:
            drafts, start = call["input_ids"][1:], call["positions"][0] + 1
            n = next((i for i, d in enumerate(drafts) if committed[start + i] != d), len(drafts))
            if n < len(drafts):
                return call, n, start
        raise AssertionError("no verify rejected a draft")


class CorrectLoopsAreClean(CheckCaptures):
    def test_every_correct_loop_in_every_shape(self):
        for loop in ("speculative", "hf-assisted", "greedy", "masked-rejected"):
            for shape in spec_loops.LOOPS[loop][1]:
                with self.subTest(loop=loop, shape=shape):
                    path, c = self.capture(loop, shape)
                    code, result, stderr = run_check(path)
                    self.assertEqual(code, 0, f"{stderr}{result}")
                    self.assertTrue(result["ok"])
                    self.assertIsNone(result["root_cause"])
                    self.assertIsNone(result["first_divergence"])
                    self.assertEqual(result["calls"]["target"], len(c.calls("target")))
                    self.assertGreater(result["rows_value_checked"], 0)
                    self.assertLess(result["max_value_error"], 1e-4)

    def test_top_k_logits_are_checked_too(self):
        path, _ = self.capture("speculative", "dynamic", logits=("top_k", 20))
        code, result, stderr = run_check(path)
        self.assertEqual(code, 0, f"{stderr}{result}")
        self.assertGreater(result["logit_rows_checked"], 0)


class BuggyLoopsAreNamed(CheckCaptures):
    def test_prefix_fed_again_to_the_drafter(self):
        cause, _, c = self.breach("prefix-refed", "dynamic")
        committed = c.manifest["committed"]
        refed = next(call for call in c.calls("drafter")
                     if call["before_ids"] and any(r >= 0 for r in call["before_ids"][0])
                     and call["input_ids"] == committed[:len(call["input_ids"])])
        self.assertCause(cause, "drafter", refed["index"], "forward", "refed_prefix")
        self.assertIn("prefix was fed again", cause["what"])

    def test_target_prune_that_keeps_one_rejected_draft(self):
        for shape, kind in (("dynamic", "crop"), ("tuples", "slice"), ("static", "none")):
            with self.subTest(shape=shape):
                cause, _, c = self.breach("keep-one-rejected", shape)
                verify, n, L = self.first_rejecting_verify(c)
                self.assertCause(cause, "target", verify["index"] + 1, "between", kind)
                self.assertEqual((cause["expected_rows"], cause["actual_rows"]), (L + n, L + n + 1))
                self.assertEqual(cause["rows"], [L + n])
                self.assertIn("rejected draft", cause["what"])

    def test_mask_that_stops_hiding_the_last_rejected_drafts(self):
        # The engine keeps rejected rows and masks them (masked-rejected, clean
        # above); this one's mask forgets the newest: the stale rows the next
        # verify attends are named between the calls, with the mask's part.
        cause, _, c = self.breach("masked-rejected-forgets", "dynamic")
        verify, n, L = self.first_rejecting_verify(c)
        self.assertCause(cause, "target", verify["index"] + 1, "between", "none")
        self.assertEqual(cause["expected_rows"], L + n)
        self.assertIn("rejected draft", cause["what"])
        self.assertIn("attention mask does not hide them", cause["what"])

    def test_reset_instead_of_rollback(self):
        for shape in ("tuples", "dynamic", "static"):
            with self.subTest(shape=shape):
                cause, _, c = self.breach("reset-not-rollback", shape)
                verify, n, L = self.first_rejecting_verify(c)
                self.assertCause(cause, "target", verify["index"] + 1, "between", "reset")
                self.assertEqual((cause["expected_rows"], cause["actual_rows"]), (L + n, 0))

    def test_crop_of_zero_treated_as_a_no_op(self):
        cause, _, c = self.breach("crop0-noop", "dynamic")
        verify, n, L = self.first_rejecting_verify(c)
        self.assertEqual(n, 0)
        # Both caches kept the rejected drafts after the same verify; the drafter reads its cache first
        # (it drafts first), but the rollback that failed is the target's, where the drafts were rejected.
        self.assertCause(cause, "target", verify["index"] + 1, "between", "none")
        self.assertEqual((cause["expected_rows"], cause["actual_rows"]), (L + n, L + len(verify["input_ids"]) - 1))
        self.assertIn("rejected draft", cause["what"])

    def test_a_drafter_alone_left_unpruned_is_named_as_the_drafter(self):
        """The negative control of the rule above: kvscope's own drafter-not-pruned fault."""
        path = os.path.join(self.directory.name, "drafter-not-pruned.kvcapture")
        done = subprocess.run([CLI, "run", "--target", os.path.join(MODELS, "llama-tiny"), "--drafter",
                               os.path.join(MODELS, "llama-tiny-draft"), "--prompt", "Once upon a time", "--gamma", "4",
                               "--max-new", "24", "--ignore-eos", "--fault", "drafter-not-pruned", "--capture", path,
                               "--no-baseline", "--json"], capture_output=True, text=True, timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr)
        code, result, stderr = run_check(path)
        self.assertEqual(code, 1, stderr)
        cause = result["root_cause"]
        self.assertEqual((cause["role"], cause["step"], cause["kind"]), ("drafter", "between", "none"))

    def test_positions_advanced_by_one_after_a_multi_token_accept(self):
        cause, _, c = self.breach("positions-plus-one", "dynamic")
        committed = c.manifest["committed"]
        calls = c.calls("target")
        accepting = next(call for call in calls[1:] if call["input_ids"][1] == committed[call["positions"][0] + 1])
        self.assertCause(cause, "target", accepting["index"] + 1, "forward", "positions")

    def test_verify_without_a_causal_mask_among_the_drafts(self):
        cause, _, _ = self.breach("verify-mask-leak", "dynamic")
        self.assertCause(cause, "target", 1, "forward", "mask")
        self.assertIn("no causal mask", cause["what"])

    def test_ring_buffer_that_rolls_one_step_early(self):
        cause, _, c = self.breach("window-roll-early", "ring")
        at_15 = next(call for call in c.calls("target") if call["positions"] == [15])
        self.assertCause(cause, "target", at_15["index"], "forward", "window")
        self.assertIn("position 0", cause["what"])

    def test_bonus_token_never_fed_to_the_drafter(self):
        cause, _, c = self.breach("bonus-not-fed", "dynamic")
        self.assertEqual((cause["role"], cause["step"], cause["kind"]), ("drafter", "forward", "skipped_position"))
        committed = c.manifest["committed"]
        call = c.calls("drafter")[cause["call"]]
        # the call fed a draft at the bonus's position: the token there is the bonus, not what it fed
        position = call["positions"][0]
        self.assertNotEqual(call["input_ids"][0], committed[position])
        self.assertIn("never fed", cause["what"])

    def test_a_bug_shows_in_the_logits_after_its_root_cause(self):
        for loop, shape in (("keep-one-rejected", "dynamic"), ("positions-plus-one", "dynamic"),
                            ("verify-mask-leak", "dynamic"), ("window-roll-early", "ring")):
            with self.subTest(loop=loop):
                cause, result, c = self.breach(loop, shape)
                symptom = result["first_divergence"]
                self.assertIsNotNone(symptom)
                if symptom["role"] == cause["role"]:
                    self.assertGreaterEqual(symptom["call"], cause["call"])


class UnusableInputs(CheckCaptures):
    def test_checkpoint_that_is_not_the_captured_one_exits_2(self):
        path, _ = self.capture("speculative", "dynamic")
        code, _, stderr = run_check(path, "--target", os.path.join(MODELS, "llama-tiny-draft"))
        self.assertEqual(code, 2)
        self.assertIn("is not the target this capture ran", stderr)

    def test_a_broken_file_exits_2(self):
        path = os.path.join(self.directory.name, "broken.kvcapture")
        with open(path, "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
        code, _, stderr = run_check(path)
        self.assertEqual(code, 2)
        self.assertIn("broken.kvcapture", stderr)


class NoReferenceModel(CheckCaptures):
    """A capture of models kvscope cannot load (not on this machine, or of a
    family it does not implement) is checked on its bookkeeping alone: the
    same root cause as with the model, no values compared, a note saying so;
    --require-model makes the missing model exit 2."""

    ELSEWHERE = {
        "which is not a model directory here": lambda m: [model.update(name_or_path="/nonexistent/an-engines-own-model")
                                                          for model in m["models"].values()],
        "is no family kvscope implements": lambda m: [model["config"].update(model_type="an-architecture-of-its-own")
                                                      for model in m["models"].values()],
    }

    def moved(self, loop, shape, change):
        path, _ = self.capture(loop, shape)
        out = os.path.join(self.directory.name, f"moved-{loop}-{shape}.kvcapture")
        rewrite_manifest(path, out, change)
        return path, out

    def test_the_bookkeeping_alone_names_the_same_root_cause(self):
        for (why, change), (loop, shape) in zip(self.ELSEWHERE.items(), (("keep-one-rejected", "dynamic"),
                                                                           ("reset-not-rollback", "static"))):
            with self.subTest(why=why, loop=loop, shape=shape):
                path, moved = self.moved(loop, shape, change)
                _, with_model, _ = run_check(path)
                code, alone, stderr = run_check(moved)
                self.assertEqual(code, 1, stderr)
                keys = ("role", "call", "step", "operation", "kind", "sequence")
                self.assertEqual({k: alone["root_cause"][k] for k in keys},
                                 {k: with_model["root_cause"][k] for k in keys}, alone["root_cause"]["what"])
                self.assertEqual(alone["rows_value_checked"], 0)
                self.assertEqual(alone["logit_rows_checked"], 0)
                self.assertTrue(any("no target model" in n and "bookkeeping" in n for n in alone["notes"]),
                                alone["notes"])
                self.assertTrue(any(why in n for n in alone["notes"]), alone["notes"])

    def test_a_correct_run_checks_clean_and_says_what_was_not_checked(self):
        _, moved = self.moved("speculative", "dynamic", self.ELSEWHERE["which is not a model directory here"])
        code, result, stderr = run_check(moved)
        self.assertEqual(code, 0, stderr)
        self.assertTrue(result["ok"])
        self.assertEqual(len([n for n in result["notes"] if "not compared with a reference" in n]), 2, result["notes"])
        done = subprocess.run([CLI, "check", moved], capture_output=True, text=True, timeout=600)
        self.assertIn("no reference model: bookkeeping only", done.stdout)

    def test_require_model_makes_a_missing_model_exit_2(self):
        for why, change in self.ELSEWHERE.items():
            with self.subTest(why=why):
                _, moved = self.moved("speculative", "dynamic", change)
                code, _, stderr = run_check(moved, "--require-model")
                self.assertEqual(code, 2)
                self.assertIn("the capture's target: ", stderr)
                self.assertIn("pass --target DIR", stderr)


def rewrite_manifest(source, target, change):
    """Copies a capture with change(manifest) applied; the tensors are untouched."""
    with open(source, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    manifest = json.loads(header["__metadata__"]["kvscope_capture"])
    change(manifest)
    header["__metadata__"]["kvscope_capture"] = json.dumps(manifest)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(target, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little") + encoded + data)


def target_calls(manifest):
    return [call for call in manifest["calls"] if call["role"] == "target"]


class HostileCaptures(CheckCaptures):
    """Captures that pass the format's validator (or not) but make no sense: check answers 0, 1 or 2 with a
    message, never crashes, never an internal error."""

    MUTATIONS = {
        "no committed sequence": lambda m: m.update(committed=None),
        "empty committed sequence": lambda m: m.update(committed=[]),
        "committed sequence of other tokens": lambda m: m.update(committed=[5] * len(m["committed"])),
        "positions far away": lambda m: [c.update(positions=[10 ** 9 + i for i in range(len(c["input_ids"]))])
                                         for c in target_calls(m)[1:]],
        "before and after swapped": lambda m: [c.update(before=c["after"], after=c["before"])
                                               for c in m["calls"] if c["before"] is not None],
        "runs reversed": lambda m: [layer.reverse() for c in m["calls"] if c["after"]
                                    for layer in c["after"]["layers"]],
        "inputs replaced": lambda m: [c.update(input_ids=[7] * len(c["input_ids"])) for c in m["calls"]],
        "states dropped": lambda m: [c.update(before=None, after=None) for c in m["calls"]],
        "calls reordered": lambda m: m["calls"].reverse(),
    }

    def test_every_mutation_gets_an_answer(self):
        for loop, shape in (("speculative", "dynamic"), ("speculative", "static"), ("greedy", "ring")):
            path, _ = self.capture(loop, shape)
            for name, change in self.MUTATIONS.items():
                with self.subTest(loop=loop, shape=shape, mutation=name):
                    mutated = os.path.join(self.directory.name, "mutated.kvcapture")
                    rewrite_manifest(path, mutated, change)
                    code, result, stderr = run_check(mutated)
                    self.assertIn(code, (0, 1, 2), stderr)
                    self.assertNotIn("internal error", stderr)
                    if code == 2:
                        self.assertIn("error:", stderr)
                    else:
                        self.assertIsNotNone(result)


class Speed(CheckCaptures):
    def test_check_of_the_48_token_pair_capture_prints_its_time(self):
        """Prints the ratio for docs; the bound of 5x is kept loose for a shared machine."""
        started = time.perf_counter()
        path, _ = self.capture("speculative", "dynamic", new_tokens=48)
        capture_seconds = time.perf_counter() - started
        started = time.perf_counter()
        code, result, stderr = run_check(path)
        check_seconds = time.perf_counter() - started
        self.assertEqual(code, 0, stderr)
        print(f"\ncheck of the 48-token pair capture: {check_seconds:.2f} s wall ({result['seconds']:.2f} s checking), "
              f"the captured run {capture_seconds:.2f} s")


if __name__ == "__main__":
    unittest.main()
