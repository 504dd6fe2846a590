"""Batched captures (format version 2): the recorder writes, for every call of
a batched run, exactly the per-sequence inputs, positions, padding slots,
rows and logits the loop had, and the commits it returned. The expectations
come from the loops' own bookkeeping (batched_loops.BatchRun) and from a spy
that copies the caches the model saw; an independent reader
(capture_reader.py) validates every file."""
import itertools
import json
import os
import struct
import subprocess
import tempfile
import unittest

import torch

from fixtures import REPO, model, pair_cases  # first: puts capture/python on sys.path
import batched_loops  # noqa: E402
import kvscope_capture  # noqa: E402
import spec_loops  # noqa: E402
from capture_reader import Capture, CaptureFormatError  # noqa: E402
from safetensors_io import read_header  # noqa: E402

GAMMA = 4
BUNDLED_PAIR = (os.path.join(REPO, "resources", "models", "target"), os.path.join(REPO, "resources", "models", "drafter"))
# kvscope-cli: $KVSCOPE_CLI, else the source tree's default build directory.
CLI = os.environ.get("KVSCOPE_CLI") or os.path.join(REPO, "build", "app", "kvscope-cli")


def prompts():
    """Three prompts of different lengths (11, 7 and 4 tokens, BOS included)."""
    once, gpl = (case["ids"] for case in pair_cases())
    return [once, gpl[:7], once[:4]]


class BatchSpy(torch.nn.Module):
    """Calls the model and keeps, per call, copies of the cache [B, kv_heads, slots,
    head_dim] per layer after the call and the logits [B, n, vocab]."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.head_dim = inner.head_dim
        self.log = []

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, input_ids, **kwargs):
        out = self.inner(input_ids, **kwargs)
        cache = out.past_key_values
        layers = [(k.clone(), v.clone()) for k, v in zip(cache.key_cache, cache.value_cache)]
        self.log.append({"after": layers, "logits": out.logits.clone()})
        return out


def record(path, run, target, drafter=None, logits="full"):
    with kvscope_capture.Recorder(path, logits=logits) as rec:
        rec.watch(target, role="target")
        if drafter is not None:
            rec.watch(drafter, role="drafter")
        result = run()
        rec.commit(result.sequences)
    return result


def real_slots(slots):
    return [row for row in slots if row >= 0]


class RecordedBatch(unittest.TestCase):
    """Shared checks of a recorded batched run against its bookkeeping and spies."""

    def check_calls(self, capture, run, role, spy=None):
        calls, expected = capture.calls(role), run.calls_of(role)
        self.assertEqual(len(calls), len(expected), role)
        for call, done in zip(calls, expected):
            what = f"{role} call {call['index']}"
            self.assertEqual(call["index"], done.index, what)
            self.assertEqual(call["input_ids"], done.input_ids, what)
            self.assertEqual(call["positions"], done.position_ids, what)
            self.assertEqual(call["positions_source"], "position_ids", what)
            if bool(done.mask.all()):
                self.assertIsNone(call["attention_mask"], what)
            else:
                self.assertEqual(call["attention_mask"]["kind"], "padding", what)
                self.assertTrue(torch.equal(capture.tensors[call["attention_mask"]["tensor"]], done.mask), what)
            for layer, sequences in enumerate(call["after_ids"]):
                for b, slots in enumerate(sequences):
                    pad, rows = done.padding_after[b], done.rows_after[b]
                    self.assertEqual(slots[:pad], [-2] * pad, f"{what} layer {layer} sequence {b}")
                    self.assertEqual(len(real_slots(slots[pad:])), rows, f"{what} layer {layer} sequence {b}")
                    self.assertEqual(len(slots), pad + rows)
            if spy is not None:
                self.check_rows_and_logits(capture, role, call, spy.log[call["index"]], what)

    def check_rows_and_logits(self, capture, role, call, seen, what):
        for layer, sequences in enumerate(call["after_ids"]):
            stored_keys, stored_values = capture.rows[role][layer]
            keys, values = seen["after"][layer]  # [B, kv_heads, slots, head_dim]
            for b, slots in enumerate(sequences):
                ids = torch.tensor(slots)
                held = ids >= 0
                self.assertTrue(torch.equal(stored_keys[:, ids[held]], keys[b][:, held]), f"{what} {layer} {b}")
                self.assertTrue(torch.equal(stored_values[:, ids[held]], values[b][:, held]), f"{what} {layer} {b}")
        logits = capture.tensors[call["logits"]["tensors"]["logits"]]
        self.assertTrue(torch.equal(logits, seen["logits"]), what)

    def check_rows_stored_once(self, capture, run, role):
        """Every real input token is one stored row; padding is never stored."""
        fed = sum(int(call.mask[:, -len(call.input_ids[0]):].sum()) for call in run.calls_of(role))
        for layer, (keys, _) in enumerate(capture.rows[role]):
            self.assertEqual(keys.shape[1], fed, f"{role} layer {layer}")


class BatchedSpeculative(RecordedBatch):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.directory.name, "batched.kvcapture")
        cls.target, cls.drafter = BatchSpy(model("llama-tiny")), BatchSpy(model("llama-tiny-draft"))
        cls.loop = record(cls.path, lambda: batched_loops.batched_speculative(cls.target, cls.drafter, prompts(), 24,
                                                                              GAMMA), cls.target, cls.drafter)
        cls.capture = Capture(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_rows_accept_different_numbers_of_drafts(self):
        self.assertTrue(any(len(set(round_)) > 1 for round_ in self.loop.accepted), self.loop.accepted)

    def test_the_loop_is_greedy_decoding(self):
        """Per-row rollback keeps every sequence exactly what greedy decoding gives."""
        for b, prompt in enumerate(prompts()):
            produced = self.loop.sequences[b]
            self.assertEqual(produced, spec_loops.greedy(model("llama-tiny"), prompt, len(produced) - len(prompt)))

    def test_header_says_version_2_and_the_batch(self):
        header, _ = read_header(self.path)
        self.assertEqual(header["__metadata__"]["version"], "2")
        self.assertEqual((self.capture.manifest["version"], self.capture.manifest["batch"]), (2, 3))

    def test_positions_masks_and_padding_slots_are_the_loops(self):
        for role, spy in (("target", self.target), ("drafter", self.drafter)):
            with self.subTest(role=role):
                self.check_calls(self.capture, self.loop, role, spy)

    def test_rollbacks_keep_each_sequences_own_rows(self):
        """Between calls each sequence keeps the first kept[b] rows it held: the
        same row ids, its rejected tail now padding."""
        checked = 0
        for rollback in self.loop.rollbacks:
            calls = self.capture.calls(rollback.role)
            if rollback.before_call == len(calls):
                continue  # the run's last rollback: no call after it shows it
            checked += 1
            previous, current = calls[rollback.before_call - 1], calls[rollback.before_call]
            for layer in range(len(current["before_ids"])):
                for b, kept in enumerate(rollback.kept):
                    held = real_slots(previous["after_ids"][layer][b])
                    now = current["before_ids"][layer][b]
                    what = f"{rollback.role} call {rollback.before_call} layer {layer} sequence {b}"
                    self.assertEqual(real_slots(now), held[:kept], what)
                    pad = len(now) - kept
                    self.assertEqual(now[:pad], [-2] * pad, what)
        self.assertGreater(checked, 10)

    def test_rows_are_stored_once_and_padding_never(self):
        for role in ("target", "drafter"):
            self.check_rows_stored_once(self.capture, self.loop, role)

    def test_commits_are_the_sequences(self):
        self.assertEqual(self.capture.manifest["committed"], self.loop.sequences)
        for b, prompt in enumerate(prompts()):
            self.assertEqual(self.capture.manifest["committed"][b][:len(prompt)], prompt)


class UniformAdvanceBug(RecordedBatch):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.directory.name, "uniform.kvcapture")
        target, drafter = model("llama-tiny"), model("llama-tiny-draft")
        cls.loop = record(cls.path, lambda: batched_loops.batched_speculative(target, drafter, prompts(), 24, GAMMA,
                                                                              bug="uniform-advance"), target, drafter)
        cls.correct = batched_loops.batched_speculative(target, drafter, prompts(), 24, GAMMA)
        cls.capture = Capture(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_the_departure_is_recorded(self):
        departure = self.loop.departure
        self.assertIsNotNone(departure)
        self.assertEqual(departure, self.loop.departures[departure["role"]])
        self.assertEqual(set(departure), {"sequence", "role", "call", "operation"})
        self.assertEqual(departure["operation"], "between")
        self.assertNotEqual(self.loop.sequences, self.correct.sequences)  # the bug changes the output

    def test_calls_before_the_departure_are_the_correct_loops(self):
        for role, departure in self.loop.departures.items():
            buggy, correct = self.loop.calls_of(role), self.correct.calls_of(role)
            for index in range(departure["call"]):
                self.assertEqual(buggy[index].input_ids, correct[index].input_ids, f"{role} {index}")
                self.assertEqual(buggy[index].position_ids, correct[index].position_ids, f"{role} {index}")
            at = departure["call"]
            differs = buggy[at].position_ids != correct[at].position_ids or buggy[at].input_ids != correct[at].input_ids
            later = any(b.position_ids != c.position_ids for b, c in zip(buggy[at:], correct[at:]))
            self.assertTrue(differs or later, role)

    def test_the_departing_sequence_keeps_rejected_drafts(self):
        """At the departure the sequence holds more rows than the correct loop's
        rollback keeps, and its recorded positions run ahead of it."""
        for role, departure in self.loop.departures.items():
            b, at = departure["sequence"], departure["call"]
            buggy = self.capture.calls(role)[at]
            rollback = next(r for r in self.correct.rollbacks if r.role == role and r.before_call == at)
            correct_rows = rollback.kept[b]
            for layer, sequences in enumerate(buggy["before_ids"]):
                self.assertGreater(len(real_slots(sequences[b])), correct_rows, f"{role} layer {layer}")
            self.assertEqual(buggy["positions"], self.loop.calls_of(role)[at].position_ids)
            self.assertGreater(buggy["positions"][b][0], self.correct.calls_of(role)[at].position_ids[b][0])

    def test_recorded_calls_are_the_loops(self):
        for role in ("target", "drafter"):
            with self.subTest(role=role):
                self.check_calls(self.capture, self.loop, role)
        self.assertEqual(self.capture.manifest["committed"], self.loop.sequences)


class BatchedGreedy(RecordedBatch):
    """HF generate()-style batched greedy decoding with left padding."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.directory.name, "greedy.kvcapture")

    def tearDown(self):
        self.directory.cleanup()

    def test_generate_style_loop_round_trips(self):
        target = BatchSpy(model("llama-tiny"))
        run = record(self.path, lambda: batched_loops.batched_greedy(target, prompts(), 12), target)
        capture = Capture(self.path)
        self.assertEqual((capture.batch, len(capture.calls("target"))), (3, 12))
        self.check_calls(capture, run, "target", target)
        self.check_rows_stored_once(capture, run, "target")
        width = max(len(prompt) for prompt in prompts())
        for b, prompt in enumerate(prompts()):
            self.assertEqual(capture.manifest["committed"][b], run.sequences[b])
            self.assertEqual(run.sequences[b], spec_loops.greedy(model("llama-tiny"), prompt, 12))
            # the prompt's left padding stays padding in every state; its positions start at 0
            for call in capture.calls("target"):
                self.assertEqual(call["after_ids"][0][b][:width - len(prompt)], [-2] * (width - len(prompt)))
            first = capture.calls("target")[0]["positions"][b]
            self.assertEqual(first[width - len(prompt):], list(range(len(prompt))))

    def test_top_k_logits_are_per_sequence(self):
        target = model("llama-tiny")
        record(self.path, lambda: batched_loops.batched_greedy(target, prompts(), 3), target, logits=("top_k", 5))
        capture = Capture(self.path)
        call = capture.calls("target")[1]
        ids = capture.tensors[call["logits"]["tensors"]["top_ids"]]
        self.assertEqual(list(ids.shape), [3, 1, 5])
        self.assertEqual(list(capture.tensors[call["logits"]["tensors"]["lse"]].shape), [3, 1])


class BatchOfOneIsVersion1(unittest.TestCase):
    def test_a_batch_of_one_writes_version_1(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "one.kvcapture")
            target = model("llama-tiny")
            run = record(path, lambda: batched_loops.batched_greedy(target, prompts()[:1], 3), target)
            capture = Capture(path)
            self.assertEqual(capture.manifest["version"], 1)
            self.assertNotIn("batch", capture.manifest)
            self.assertEqual(capture.manifest["committed"], run.sequences[0])
            self.assertEqual(capture.calls("target")[0]["input_ids"], prompts()[0])


class PaddingIsWhatTheCallsMaskMasks(unittest.TestCase):
    def test_a_call_without_the_mask_holds_the_pad_rows_as_rows(self):
        """Padding is per call: the next call that passes no mask attends the pad
        slots, so the recorder stores their K/V as rows of the sequence."""
        target = model("llama-tiny")
        ids, real = batched_loops.left_padded([[1, 377, 397], [1, 377]])
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "unmasked.kvcapture")
            with kvscope_capture.Recorder(path) as rec:
                rec.watch(target, role="target")
                cache = target(torch.tensor(ids), attention_mask=real.long()).past_key_values
                target(torch.tensor([[9], [9]]), past_key_values=cache)
            first, second = Capture(path).calls("target")
        self.assertEqual(first["after_ids"][0][1], [-2, 3, 4])  # sequence 1's pad slot, then its rows
        self.assertEqual(second["attention_mask"], None)
        before = second["before_ids"][0][1]
        self.assertNotIn(-2, before)
        self.assertEqual(before[1:], [3, 4])  # the same rows; the pad slot is a new row
        self.assertGreater(before[0], 4)


class CommitTakesOneListPerSequence(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.directory.name, "commit.kvcapture")

    def tearDown(self):
        self.directory.cleanup()

    def batch_run(self, commit):
        target = model("llama-tiny")
        with kvscope_capture.Recorder(self.path) as rec:
            rec.watch(target, role="target")
            batched_loops.batched_greedy(target, prompts(), 1)
            commit(rec)

    def test_a_flat_list_or_the_wrong_count_is_refused(self):
        for bad in ([1, 2, 3], [[1, 2], [3]], torch.zeros(3, 4, dtype=torch.long)):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                self.batch_run(lambda rec: rec.commit(bad))

    def test_tensors_per_sequence_are_accepted(self):
        self.batch_run(lambda rec: rec.commit([torch.tensor(prompt) for prompt in prompts()]))
        self.assertEqual(Capture(self.path).manifest["committed"], prompts())


class ReaderRefusesBatchedBreaches(unittest.TestCase):
    """capture_reader.py refuses every kind of broken version 2 field."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.good = os.path.join(cls.directory.name, "good.kvcapture")
        target = model("llama-tiny")
        record(cls.good, lambda: batched_loops.batched_greedy(target, prompts(), 2), target)
        Capture(cls.good)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def broken(self, change):
        """Applies change(manifest) to a copy of the good file; returns the reader's error."""
        with open(self.good, "rb") as f:
            data = f.read()
        length = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + length])
        manifest = json.loads(header["__metadata__"]["kvscope_capture"])
        change(manifest)
        header["__metadata__"]["kvscope_capture"] = json.dumps(manifest)
        encoded = json.dumps(header).encode()
        encoded += b" " * (-len(encoded) % 8)
        path = os.path.join(self.directory.name, "broken.kvcapture")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(encoded)) + encoded + data[8 + length:])
        with self.assertRaises(CaptureFormatError) as raised:
            Capture(path)
        return str(raised.exception)

    def test_each_breach_is_refused(self):
        def set_batch(value):
            return lambda m: m.update(batch=value)
        self.assertIn("batch", self.broken(set_batch(0)))
        self.assertIn("batch", self.broken(set_batch(-3)))
        self.assertIn("batch", self.broken(set_batch(1 << 40)))
        self.assertIn("batch", self.broken(lambda m: m.pop("batch")))
        self.assertIn("committed", self.broken(lambda m: m["committed"].pop()))
        self.assertIn("input_ids", self.broken(lambda m: m["calls"][1]["input_ids"].pop()))
        self.assertIn("positions[1]", self.broken(lambda m: m["calls"][1]["positions"][1].append(5)))
        self.assertIn("positions[2]", self.broken(lambda m: m["calls"][0]["positions"][2].__setitem__(0, -1)))
        self.assertIn("positions[0]", self.broken(lambda m: m["calls"][0]["positions"][0].__setitem__(0, 1 << 40)))
        self.assertIn("slots", self.broken(lambda m: m["calls"][0]["after"]["layers"][0][1].append([-2, 1])))
        self.assertIn("repeats", self.broken(lambda m: m["calls"][0]["after"]["layers"][0].__setitem__(
            1, m["calls"][0]["after"]["layers"][0][0])))
        self.assertIn("per sequence", self.broken(lambda m: m["calls"][0]["after"]["layers"][0].pop()))


@unittest.skipUnless(os.path.exists(CLI), f"needs kvscope-cli ($KVSCOPE_CLI, or {CLI})")
class CheckNamesTheSequence(unittest.TestCase):
    """kvscope-cli check on batched runs: every sequence checked as its own run;
    a correct loop checks clean, and each bug's root cause is the loop's first
    departure from its own books: the same sequence, role, call and operation."""

    def check(self, path):
        done = subprocess.run([CLI, "check", path, "--json"], capture_output=True, text=True, timeout=300)
        self.assertIn(done.returncode, (0, 1), done.stdout + done.stderr)
        return done.returncode, json.loads(done.stdout)

    def run_loop(self, loop, pair=("llama-tiny", "llama-tiny-draft")):
        target, drafter = (model(name) for name in pair)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "batched.kvcapture")
            run = record(path, lambda: loop(target, drafter), target, drafter)
            code, report = self.check(path)
        return run, code, report

    def test_a_correct_speculative_batch_checks_clean(self):
        run, code, report = self.run_loop(lambda t, d: batched_loops.batched_speculative(t, d, prompts(), 12, GAMMA))
        self.assertTrue(any(len(set(round_)) > 1 for round_ in run.accepted), run.accepted)  # per-row acceptance
        self.assertEqual(code, 0, report)
        self.assertTrue(report["ok"])
        self.assertEqual(report["batch"], 3)
        self.assertEqual([s["sequence"] for s in report["sequences"]], [0, 1, 2])
        self.assertTrue(all(s["ok"] for s in report["sequences"]), report["sequences"])
        self.assertGreater(report["rows_value_checked"], 0)
        self.assertGreater(report["logit_rows_checked"], 0)

    def test_a_left_padded_greedy_batch_checks_clean(self):
        run, code, report = self.run_loop(lambda t, d: batched_loops.batched_greedy(t, prompts(), 8))
        self.assertEqual(code, 0, report)
        self.assertEqual(report["batch"], 3)

    def test_each_bug_is_named_by_sequence_role_call_and_operation(self):
        """The bundled pair accepts often enough that rows differ in every
        round; two orders of the prompts make different sequences depart first."""
        departed = set()
        for bug, shift in itertools.product(batched_loops.BUGS, (0, 2)):
            with self.subTest(bug=bug, shift=shift):
                batch = prompts()[shift:] + prompts()[:shift]
                run, code, report = self.run_loop(
                    lambda t, d: batched_loops.batched_speculative(t, d, batch, 12, GAMMA, bug=bug), BUNDLED_PAIR)
                first = run.departure
                departed.add(first["sequence"])
                self.assertIsNotNone(first, bug)
                self.assertEqual(code, 1, report)
                cause = report["root_cause"]
                self.assertIsNotNone(cause, report)
                named = {"sequence": cause["sequence"], "role": cause["role"], "call": cause["call"],
                         "operation": cause["step"]}
                self.assertEqual(named, first, cause["what"])
                self.assertTrue(cause["what"].startswith(f"sequence {first['sequence']}: "), cause["what"])
                self.assertFalse(report["sequences"][first["sequence"]]["ok"])
        self.assertGreater(len(departed), 1, "every bug departed in the same sequence: the test cannot tell")

    def test_a_batch_of_one_is_still_checked(self):
        target = model("llama-tiny")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "one.kvcapture")
            record(path, lambda: batched_loops.batched_greedy(target, prompts()[:1], 4), target)
            done = subprocess.run([CLI, "check", path], capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("every call kept the cache contract", done.stdout)


if __name__ == "__main__":
    unittest.main()
