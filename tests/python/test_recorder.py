"""The recorder: never changes the run, writes a file an independent reader
accepts, and records exactly the caches, inputs and logits the engine had."""
import inspect
import os
import tempfile
import time
import unittest
import warnings

import torch

from fixtures import model, pair_cases, window_cases  # first: puts capture/python on sys.path
import kvscope_capture  # noqa: E402
from kvscope_capture import model_info  # noqa: E402
import spec_loops  # noqa: E402
from capture_reader import Capture  # noqa: E402
from safetensors_io import read_header
from spy import Spy


def record(path, run, target, drafter=None, logits="full"):
    """Runs run() under a Recorder watching target (and drafter); returns (result, recorder)."""
    with kvscope_capture.Recorder(path, logits=logits) as rec:
        rec.watch(target, role="target")
        if drafter is not None:
            rec.watch(drafter, role="drafter")
        result = run()
        rec.commit(result)
    return result, rec


class TempDir(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.directory.cleanup()

    def path(self, name="run.kvcapture"):
        return os.path.join(self.directory.name, name)


class NeverChangesTheRun(TempDir):
    def test_every_loop_gives_the_same_tokens_with_and_without_the_recorder(self):
        target, drafter, mistral = model("llama-tiny"), model("llama-tiny-draft"), model("mistral-sw-tiny")
        for name, (_, shapes) in spec_loops.LOOPS.items():
            for shape in shapes:
                window = name == "window-roll-early" or shape == "ring"
                t, d = (mistral, None) if window else (target, drafter)
                prompt = window_cases()[0]["ids"] if window else pair_cases()[0]["ids"]
                run = lambda: spec_loops.run_loop(name, t, d, prompt, 24, shape)  # noqa: E731
                with self.subTest(loop=name, shape=shape):
                    self.assertEqual(record(self.path(), run, t, d)[0], run())

    def test_logits_are_bitwise_identical_with_and_without_the_recorder(self):
        plain, watched = Spy(model("llama-tiny")), Spy(model("llama-tiny"))
        drafter = model("llama-tiny-draft")
        prompt = pair_cases()[0]["ids"]
        spec_loops.speculative(plain, drafter, prompt, 24, 4, "dynamic")
        record(self.path(), lambda: spec_loops.speculative(watched, drafter, prompt, 24, 4, "dynamic"), watched, drafter)
        self.assertEqual(len(plain.log), len(watched.log))
        for a, b in zip(plain.log, watched.log):
            self.assertTrue(torch.equal(a["logits"], b["logits"]))

    def test_the_watched_forward_shows_the_original_signature(self):
        """generate() inspects forward's parameters (e.g. cache_position) to choose its arguments."""
        target = model("llama-tiny")
        original = inspect.signature(target.forward)
        with kvscope_capture.Recorder(self.path()) as rec:
            rec.watch(target, role="target")
            self.assertEqual(inspect.signature(target.forward), original)
            self.assertIn("cache_position", inspect.signature(target.forward).parameters)

    def test_forward_is_restored_even_when_the_run_raises(self):
        target = model("llama-tiny")
        with self.assertRaises(ZeroDivisionError):
            with kvscope_capture.Recorder(self.path()) as rec:
                rec.watch(target, role="target")
                self.assertIn("forward", target.__dict__)
                spec_loops.greedy(target, [1, 2, 3], 2, "dynamic")
                raise ZeroDivisionError
        self.assertNotIn("forward", target.__dict__)
        self.assertFalse(Capture(self.path()).manifest["complete"])  # what ran before the error is kept

    def test_a_batch_that_changes_size_stops_the_recorder_not_the_engine(self):
        target = model("llama-tiny")
        two, one = torch.tensor([[1, 377, 397], [1, 377, 397]]), torch.tensor([[1, 377]])
        expected = target(one).logits
        with self.assertRaises(kvscope_capture.CaptureError) as raised:
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                with kvscope_capture.Recorder(self.path()) as rec:
                    rec.watch(target, role="target")
                    target(two)
                    logits = target(one).logits
        self.assertTrue(torch.equal(logits, expected))
        self.assertIn("batch size 1 after calls of batch size 2", str(raised.exception))
        self.assertTrue(any("batch size" in str(w.message) for w in warned))
        self.assertFalse(os.path.exists(self.path()))
        self.assertNotIn("forward", target.__dict__)


class RoundTrip(TempDir):
    """Every state, row, input and logit in the file equals what the spy saw."""

    def check_against_spy(self, capture, role, spy):
        calls = capture.calls(role)
        self.assertEqual(len(calls), len(spy.log))
        for call, seen in zip(calls, spy.log):
            self.assertEqual(call["input_ids"], seen["input_ids"])
            for moment in ("before", "after"):
                self.check_state(capture, role, call[f"{moment}_ids"], seen[moment], f"{role} {call['index']} {moment}")
            logits = capture.tensors[call["logits"]["tensors"]["logits"]] if capture.logits_mode["mode"] == "full" else None
            if logits is not None:
                self.assertTrue(torch.equal(logits, seen["logits"]))
            else:
                top_values = capture.tensors[call["logits"]["tensors"]["top_values"]]
                k = top_values.shape[1]
                self.assertTrue(torch.equal(top_values, seen["logits"].topk(k, dim=-1).values))
                lse = capture.tensors[call["logits"]["tensors"]["lse"]]
                self.assertLess(float((lse - torch.logsumexp(seen["logits"].double(), -1).float()).abs().max()), 1e-6)

    def check_state(self, capture, role, decoded, seen, what):
        if seen is None:
            self.assertIsNone(decoded, what)
            return
        for layer, slots in enumerate(decoded):
            present = layer < len(seen) and seen[layer] is not None
            keys, values = seen[layer] if present else (None, None)
            self.assertEqual(len(slots), keys.shape[1] if present else 0, what)
            if not slots:
                continue
            ids = torch.tensor(slots)
            stored_keys, stored_values = capture.rows[role][layer]
            written = ids >= 0
            self.assertTrue(torch.equal(stored_keys[:, ids[written]], keys[:, written]), f"{what} layer {layer}")
            self.assertTrue(torch.equal(stored_values[:, ids[written]], values[:, written]), f"{what} layer {layer}")
            self.assertEqual(int(keys[:, ~written].count_nonzero()) + int(values[:, ~written].count_nonzero()), 0)

    def run_pair(self, shape, loop="speculative", logits="full"):
        target, drafter = Spy(model("llama-tiny")), Spy(model("llama-tiny-draft"))
        prompt = pair_cases()[0]["ids"]
        tokens, _ = record(self.path(), lambda: spec_loops.run_loop(loop, target, drafter, prompt, 48, shape),
                           target, drafter, logits)
        capture = Capture(self.path())
        self.check_against_spy(capture, "target", target)
        self.check_against_spy(capture, "drafter", drafter)
        self.assertEqual(capture.manifest["committed"], tokens)
        return capture

    def test_every_cache_shape_round_trips(self):
        for shape in spec_loops.LOOPS["speculative"][1]:
            with self.subTest(shape=shape):
                self.run_pair(shape)

    def test_buggy_loops_round_trip(self):
        for loop in ("reset-not-rollback", "crop0-noop", "prefix-refed"):
            with self.subTest(loop=loop):
                self.run_pair("tuples", loop)

    def test_top_k_logits_round_trip(self):
        capture = self.run_pair("dynamic", logits=("top_k", 5))
        self.assertEqual(capture.manifest["logits"], {"mode": "top_k", "k": 5})

    def test_ring_buffer_round_trips(self):
        target = Spy(model("mistral-sw-tiny"))
        for roll_early in (False, True):
            record(self.path(), lambda: spec_loops.greedy(target, window_cases()[0]["ids"], 24, "ring", roll_early), target)
            self.check_against_spy(Capture(self.path()), "target", target)
            target.log.clear()

    def test_header_metadata_and_manifest(self):
        capture = self.run_pair("dynamic")
        header, _ = read_header(self.path())
        metadata = header["__metadata__"]
        self.assertEqual((metadata["format"], metadata["version"]), ("kvscope-capture", "1"))
        manifest = capture.manifest
        self.assertEqual((manifest["format"], manifest["version"], manifest["complete"]), ("kvscope-capture", 1, True))
        self.assertIn("kvscope_capture", manifest["engine"]["recorder"])
        target = manifest["models"]["target"]
        self.assertEqual(target["config"]["num_key_value_heads"], 2)
        embedding = model("llama-tiny").weights["model.embed_tokens.weight"].double()
        self.assertEqual(target["fingerprint"]["shape"], [512, 64])
        self.assertAlmostEqual(target["fingerprint"]["sum_squares"], float((embedding ** 2).sum()), places=9)
        self.assertEqual([c["index"] for c in capture.calls("drafter")], list(range(len(capture.calls("drafter")))))

    def test_rows_are_stored_once_so_the_size_follows_rows_written(self):
        capture = self.run_pair("dynamic")
        for role in ("target", "drafter"):
            fed = sum(len(call["input_ids"]) for call in capture.calls(role))
            self.assertEqual(capture.rows[role][0][0].shape[1], fed, role)  # one row per token fed, never per step
        size = os.path.getsize(self.path())
        rows_bytes = sum(k.numel() * 2 * 4 for layers in capture.rows.values() for k, _ in layers)
        print(f"\n48-token llama-tiny pair capture: {size} bytes ({rows_bytes} of K/V rows, the rest full logits and header)")


class EmbeddingFingerprint(unittest.TestCase):
    """The fingerprint is summed one block at a time and remembered per
    embedding tensor: neither may change what it says."""

    def module(self, weight):
        module = torch.nn.Module()
        module.embed_tokens = torch.nn.Embedding(*weight.shape, dtype=weight.dtype)
        with torch.no_grad():
            module.embed_tokens.weight.copy_(weight)
        module.get_input_embeddings = lambda: module.embed_tokens
        return module

    def expected(self, weight):
        wide = weight.detach().float().double()
        return float(wide.sum()), float((wide * wide).sum())

    def test_blocks_sum_to_the_whole_matrix_in_float64(self):
        block = model_info.FINGERPRINT_BLOCK_ELEMENTS
        model_info.FINGERPRINT_BLOCK_ELEMENTS = 1000  # 33 blocks of the 512 x 64 matrix, the last one short
        try:
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                weight = (torch.randn(512, 64, generator=torch.Generator().manual_seed(3)) * 0.02).to(dtype)
                fingerprint = model_info.weights_fingerprint(self.module(weight))
                total, squares = self.expected(weight)
                self.assertEqual(fingerprint["shape"], [512, 64])
                self.assertAlmostEqual(fingerprint["sum"], total, delta=1e-12 * max(1.0, abs(total)), msg=str(dtype))
                self.assertAlmostEqual(fingerprint["sum_squares"], squares, delta=1e-12 * squares, msg=str(dtype))
        finally:
            model_info.FINGERPRINT_BLOCK_ELEMENTS = block

    def test_an_embedding_written_in_place_is_read_again(self):
        module = self.module(torch.randn(64, 16, generator=torch.Generator().manual_seed(4)))
        first = model_info.weights_fingerprint(module)
        self.assertEqual(model_info.weights_fingerprint(module), first)
        with torch.no_grad():
            module.embed_tokens.weight.mul_(2)  # what load_state_dict's copy_ does: the same tensor, new values
        second = model_info.weights_fingerprint(module)
        self.assertAlmostEqual(second["sum_squares"], 4 * first["sum_squares"], delta=1e-9 * first["sum_squares"])
        self.assertEqual((second["sum"], second["sum_squares"]), self.expected(module.embed_tokens.weight))

    def test_another_tensor_of_the_same_shape_is_its_own(self):
        modules = [self.module(torch.randn(64, 16, generator=torch.Generator().manual_seed(s))) for s in (5, 6)]
        fingerprints = [model_info.weights_fingerprint(m) for m in modules]
        self.assertNotEqual(fingerprints[0]["sum_squares"], fingerprints[1]["sum_squares"])
        for module, fingerprint in zip(modules, fingerprints):
            self.assertEqual((fingerprint["sum"], fingerprint["sum_squares"]),
                             self.expected(module.embed_tokens.weight))


class Overhead(TempDir):
    def test_recorder_overhead_on_the_48_token_loop(self):
        """Prints the time with / without the recorder (CPU time, best of 3): not asserted."""
        target, drafter = model("llama-tiny"), model("llama-tiny-draft")
        prompt = pair_cases()[0]["ids"]
        run = lambda: spec_loops.speculative(target, drafter, prompt, 48, 4, "dynamic")  # noqa: E731
        plain, recorded = [], []
        for _ in range(3):
            start = time.process_time()
            run()
            plain.append(time.process_time() - start)
            start = time.process_time()
            record(self.path(), run, target, drafter)
            recorded.append(time.process_time() - start)
        print(f"\nrecorder overhead, 48-token speculative loop (DynamicCache): {min(plain) * 1e3:.0f} ms plain, "
              f"{min(recorded) * 1e3:.0f} ms recorded ({min(recorded) / min(plain):.2f}x)")


if __name__ == "__main__":
    unittest.main()
