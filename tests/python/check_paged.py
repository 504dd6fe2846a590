"""Paged KV pools (tests/python/paged_engine.py, a vLLM-style engine over the
bundled target/drafter): the recorder reads the pools through the engine's
cache_reader and writes format version 3 with each state's `paged` field;
`kvscope-cli check --json` is clean on the correct engine and names, for
each bug in two prompt orders, exactly the engine's own first departure
(sequence, role, call, operation), which the engine's books record, never
this test. Hostile `paged` fields are refused with exit 2 naming the field."""
import itertools
import json
import os
import subprocess
import tempfile
import unittest

import torch

from fixtures import REPO, model, pair_cases  # first: puts capture/python on sys.path
import kvscope_capture  # noqa: E402
import paged_engine  # noqa: E402
import spec_loops  # noqa: E402
from capture_reader import Capture  # noqa: E402
from hostile_captures import read_capture, write_capture  # noqa: E402

GAMMA = 4
NEW_TOKENS = 12
TARGET, DRAFTER = (os.path.join(REPO, "resources", "models", name) for name in ("target", "drafter"))
CLI = os.environ.get("KVSCOPE_CLI") or os.path.join(REPO, "build", "app", "kvscope-cli")


def prompts():
    """Three prompts of different lengths (11, 7 and 4 tokens, BOS included)."""
    once, gpl = (case["ids"] for case in pair_cases())
    return [once, gpl[:7], once[:4]]


def record(path, batch, bug=None):
    target, drafter = paged_engine.PagedLlama(TARGET), paged_engine.PagedLlama(DRAFTER)
    with kvscope_capture.Recorder(path) as rec:
        run = paged_engine.paged_speculative(target, drafter, batch, NEW_TOKENS, GAMMA, bug=bug, recorder=rec)
        rec.commit(run.sequences)
    return run


def check(path):
    done = subprocess.run([CLI, "check", path, "--json"], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


class CorrectEngine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.directory.name, "paged.kvcapture")
        cls.engine = record(cls.path, prompts())
        cls.capture = Capture(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_greedy_output_is_the_non_paged_reference_decode(self):
        reference = model(TARGET)
        for b, prompt in enumerate(prompts()):
            produced = self.engine.sequences[b]
            self.assertEqual(produced, spec_loops.greedy(reference, prompt, len(produced) - len(prompt)))

    def test_rows_accept_different_numbers_of_drafts(self):
        self.assertTrue(any(len(set(round_)) > 1 for round_ in self.engine.accepted), self.engine.accepted)

    def test_the_books_never_depart(self):
        self.assertIsNone(self.engine.departure)

    def test_the_file_is_version_3_with_every_states_pool_slots(self):
        self.assertEqual(self.capture.manifest["version"], 3)
        states = 0
        for call in self.capture.manifest["calls"]:
            for field in ("before", "after"):
                state = call[field]
                paged = state["paged"]
                self.assertEqual((paged["block_size"], paged["num_blocks"]), (paged_engine.BLOCK_SIZE, 64))
                for layer, sequences in enumerate(state["layers"]):
                    for b, runs in enumerate(sequences):
                        # the pool runs tile the same slots and pad exactly where the rows do
                        rows, pool = expand(runs), expand(paged["layers"][layer][b])
                        self.assertEqual(len(rows), len(pool))
                        self.assertEqual([r == -2 for r in rows], [p == -2 for p in pool])
                        held = [p for p in pool if p >= 0]
                        self.assertEqual(len(set(held)), len(held), "a correct engine maps each pool slot once")
                states += 1
        self.assertGreater(states, 20)

    @unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
    def test_check_is_clean(self):
        code, stdout, stderr = check(self.path)
        self.assertEqual(code, 0, stdout + stderr)
        report = json.loads(stdout)
        self.assertTrue(report["ok"])
        self.assertEqual(report["batch"], 3)
        self.assertGreater(report["rows_value_checked"], 0)
        self.assertGreater(report["logit_rows_checked"], 0)


def expand(runs):
    slots = []
    for first, count in runs:
        slots += [first] * count if first < 0 else list(range(first, first + count))
    return slots


@unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
class BuggyEngines(unittest.TestCase):
    def test_each_bug_is_named_by_its_departure(self):
        """Two orders of the prompts make the bug depart in different sequences."""
        departed = {}
        for bug, shift in itertools.product(paged_engine.BUGS, (0, 2)):
            with self.subTest(bug=bug, shift=shift), tempfile.TemporaryDirectory() as directory:
                batch = prompts()[shift:] + prompts()[:shift]
                path = os.path.join(directory, "paged.kvcapture")
                run = record(path, batch, bug)
                first = run.departure
                self.assertIsNotNone(first, bug)
                departed.setdefault(bug, set()).add(first["sequence"])
                code, stdout, stderr = check(path)
                self.assertEqual(code, 1, stdout + stderr)
                cause = json.loads(stdout)["root_cause"]
                named = {"sequence": cause["sequence"], "role": cause["role"], "call": cause["call"],
                         "operation": cause["step"]}
                self.assertEqual(named, first, cause["what"])
                self.assertTrue(cause["what"].startswith(f"sequence {first['sequence']}: "), cause["what"])
                self.check_explanation(bug, cause)
        for bug, sequences in departed.items():
            self.assertGreater(len(sequences), 1, f"{bug} departed in the same sequence in both orders")

    def check_explanation(self, bug, cause):
        """The block facts of the wrong rows (core/check/paged_explanation.h), in row_details and the sentence."""
        facts = [detail for detail in cause["row_details"] if "block" in detail]
        self.assertTrue(facts, cause)
        for detail in facts:
            self.assertTrue(0 <= detail["block"] < 64 and 0 <= detail["offset"] < paged_engine.BLOCK_SIZE, detail)
        if bug == "freed-block":
            handed = [d for d in facts if d["freed_and_handed_to"] is not None]
            self.assertTrue(handed, facts)
            self.assertIn("(a freed block)", cause["what"])
            self.assertTrue(all(d["also_mapped_by"] or d["freed_and_handed_to"] == cause["sequence"] for d in handed))
        else:
            self.assertTrue(all(d["past_length"] for d in facts), facts)
            self.assertTrue(all(not d["also_mapped_by"] and d["freed_and_handed_to"] is None for d in facts), facts)
            self.assertIn("rows the sequence should hold", cause["what"])


class ReaderMistakes(unittest.TestCase):
    """A cache_reader that gives what the recorder cannot write stops recording
    with a message naming the problem; the engine's run goes on."""

    def record_with(self, break_cache):
        target = paged_engine.PagedLlama(TARGET)
        with tempfile.TemporaryDirectory() as directory:
            rec = kvscope_capture.Recorder(os.path.join(directory, "broken.kvcapture"))
            run = paged_engine.BatchRun([list(p) for p in prompts()[1:]])
            side = paged_engine.PagedSide(target, "target", run, 2)
            rec.watch(target, role="target", cache_reader=lambda *a: break_cache(side.cache(*a)))
            ids, real = paged_engine.left_padded([p[:-1] for p in prompts()[1:]])
            with self.assertWarns(RuntimeWarning):
                side.feed(ids, real)
            self.assertEqual(side.lengths, [6, 3])  # the engine's call ran
            with self.assertRaises(kvscope_capture.CaptureError) as raised:
                rec.__exit__(None, None, None)
        return str(raised.exception)

    def test_each_mistake_is_named(self):
        def drop_sequence(cache):
            cache.sequences.pop()
            return cache

        def no_block_size(cache):
            cache.block_size = None
            return cache

        def block_outside(cache):
            if cache.sequences[0].layers[0].blocks:
                cache.sequences[0].layers[0].blocks[0] = 64
            return cache

        def short_blocks(cache):
            if cache.sequences[1].layers[0].blocks:
                cache.sequences[1].layers[0].blocks.pop()
            return cache

        cases = {"gave 1 sequences for a call of 2": drop_sequence,
                 "block_size must be an integer in [1, 65536], not None": no_block_size,
                 "layer 0 sequence 0 names block 64, outside the pool's 64 blocks": block_outside,
                 "layer 0 sequence 1: 2 blocks and 3 offsets for 3 rows": short_blocks}
        for message, mistake in cases.items():
            with self.subTest(message):
                self.assertIn(message, self.record_with(mistake))

    def test_a_reader_must_be_callable(self):
        with self.assertRaises(ValueError):
            kvscope_capture.Recorder(os.devnull).watch(paged_engine.PagedLlama(TARGET), cache_reader="cache")


@unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
class HostilePagedFields(unittest.TestCase):
    """Each broken `paged` field is refused with exit 2, the message naming it."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.directory.name, "paged.kvcapture")
        target, drafter = paged_engine.PagedLlama(TARGET), paged_engine.PagedLlama(DRAFTER)
        with kvscope_capture.Recorder(cls.path) as rec:
            run = paged_engine.paged_speculative(target, drafter, prompts()[1:], 2, 2, recorder=rec)
            rec.commit(run.sequences)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def refused(self, change, named):
        broken = os.path.join(self.directory.name, "broken.kvcapture")
        version, manifest, tensors = read_capture(self.path)
        change(manifest)
        write_capture(broken, "2" if manifest["version"] == 2 else version, manifest, tensors)
        code, stdout, stderr = check(broken)
        self.assertEqual(code, 2, stdout + stderr)
        self.assertIn(named, stderr + stdout)

    def paged(self, manifest):
        return manifest["calls"][1]["after"]["paged"]

    def slots(self, manifest):
        return sum(count for _, count in manifest["calls"][1]["after"]["layers"][0][0])

    def longest(self, manifest):
        """A sequence without padding slots in call 1's first layer."""
        sequences = manifest["calls"][1]["after"]["layers"][0]
        return next(b for b, runs in enumerate(sequences) if all(first != -2 for first, _ in runs))

    def test_each_breach_is_refused(self):
        cases = {
            "block_size": (lambda m: self.paged(m).update(block_size=0), ".paged.block_size"),
            "huge block_size": (lambda m: self.paged(m).update(block_size=1 << 40), ".paged.block_size"),
            "num_blocks": (lambda m: self.paged(m).update(num_blocks=-3), ".paged.num_blocks"),
            "pool too large": (lambda m: self.paged(m).update(block_size=1 << 16, num_blocks=1 << 20), "pool slots"),
            "fractional": (lambda m: self.paged(m).update(num_blocks=2.5), ".paged.num_blocks"),
            "no layers": (lambda m: self.paged(m).pop("layers"), "'layers'"),
            "layer count": (lambda m: self.paged(m)["layers"].pop(), ".paged.layers"),
            "sequence count": (lambda m: self.paged(m)["layers"][0].pop(), ".paged.layers[0]"),
            "pool slot past the pool": (lambda m: self.paged(m)["layers"][0].__setitem__(
                self.longest(m), [[64 * paged_engine.BLOCK_SIZE - 1, self.slots(m)]]), "past the pool"),
            "negative pool slot": (lambda m: self.paged(m)["layers"][0][0].__setitem__(-1, [-7, 1]), "first"),
            "slots not tiled": (lambda m: self.paged(m)["layers"][0][0].append([0, 1]), "slots"),
            "padding moved": (lambda m: self.paged(m)["layers"][0].__setitem__(
                self.longest(m), [[-2, self.slots(m)]]), "slot 0 is padding where the layer holds a row"),
            "free block outside": (lambda m: self.paged(m).update(free=[[60, 10]]), ".paged.free"),
            "free not runs": (lambda m: self.paged(m).update(free=[7]), ".paged.free"),
            "version 2": (lambda m: m.update(version=2), "version"),
        }
        for name, (change, named) in cases.items():
            with self.subTest(name):
                self.refused(change, named)


if __name__ == "__main__":
    unittest.main()
