"""Calls outside the loops' usual path, and the strict reader refusing broken files."""
import json
import os
import tempfile
import unittest

import torch

from fixtures import model  # first: puts capture/python on sys.path
import kvscope_capture  # noqa: E402
from capture_reader import Capture, CaptureFormatError  # noqa: E402
from hf_caches import DynamicCache, StaticCache  # noqa: E402
from kvscope_capture.cache_views import read_cache  # noqa: E402
from kvscope_capture.safetensors_writer import write_safetensors  # noqa: E402
from safetensors_io import read_tensors  # noqa: E402

PROMPT = [1, 377, 397, 319, 310]


class Edges(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.directory.name, "run.kvcapture")

    def tearDown(self):
        self.directory.cleanup()

    def record(self, calls):
        target = model("llama-tiny")
        with kvscope_capture.Recorder(self.path) as rec:
            rec.watch(target, role="target")
            calls(target)
        return Capture(self.path)

    def test_a_call_without_cache_then_with_one(self):
        def calls(target):
            target(torch.tensor([PROMPT]), use_cache=False)
            cache = target(torch.tensor([PROMPT[:-1]]), past_key_values=DynamicCache()).past_key_values
            target(torch.tensor([PROMPT[-1:]]), past_key_values=cache)
        first, second, third = self.record(calls).calls("target")
        self.assertIsNone(first["before"])
        self.assertIsNone(first["after"])
        self.assertEqual(second["between"]["kind"], "none")  # an empty new cache: nothing held before either
        self.assertEqual(third["positions"], [4])

    def test_positions_come_from_position_ids_then_cache_position_then_the_past_length(self):
        def calls(target):
            cache = StaticCache(2, 2, 16, 16)
            target(torch.tensor([PROMPT]), past_key_values=cache, cache_position=torch.arange(5))
            target(torch.tensor([[7]]), past_key_values=cache, cache_position=torch.tensor([5]),
                   position_ids=torch.tensor([[9]]))
            target(torch.tensor([[8]]), past_key_values=cache)
        calls_ = self.record(calls).calls("target")
        self.assertEqual([(c["positions"], c["positions_source"]) for c in calls_],
                         [([0, 1, 2, 3, 4], "cache_position"), ([9], "position_ids"), ([6], "past_length")])
        self.assertEqual(calls_[1]["cache_position"], [5])
        self.assertEqual(calls_[0]["after"]["layers"][0], [[0, 5], [-1, 11]])

    def test_a_padding_mask_is_recorded_and_an_all_ones_mask_is_not(self):
        def calls(target):
            cache = target(torch.tensor([PROMPT[:3]]), attention_mask=torch.ones(1, 3)).past_key_values
            target(torch.tensor([PROMPT[3:]]), past_key_values=cache, attention_mask=torch.tensor([[0, 1, 1, 1, 1]]))
        c = self.record(calls)
        first, second = c.calls("target")
        self.assertIsNone(first["attention_mask"])
        self.assertEqual(second["attention_mask"]["kind"], "padding")
        self.assertEqual(c.tensors[second["attention_mask"]["tensor"]].tolist(), [[False, True, True, True, True]])

    def test_a_mask_wider_than_the_cache_stops_the_recorder_not_the_engine(self):
        target = MaskIgnoringModel(model("llama-tiny"))
        with self.assertRaises(kvscope_capture.CaptureError) as raised:
            with self.assertWarns(RuntimeWarning):
                with kvscope_capture.Recorder(self.path) as rec:
                    rec.watch(target, role="target")
                    out = target(torch.tensor([PROMPT]), attention_mask=torch.ones(1, 1, 5, 9, dtype=torch.bool))
        self.assertTrue(torch.equal(out.logits, model("llama-tiny")(torch.tensor([PROMPT])).logits))
        self.assertIn("attention_mask covers 9 keys", str(raised.exception))


class MaskIgnoringModel(torch.nn.Module):
    """An engine whose 4-D mask does not follow the cache's slots (it ignores the mask)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def forward(self, input_ids, attention_mask=None, past_key_values=None):
        return self.inner(input_ids, past_key_values=past_key_values)


class HybridCache:
    """transformers 4.43's HybridCache layout: key_cache / value_cache buffers and is_sliding."""

    def __init__(self, sliding):
        self.is_sliding = sliding
        self.key_cache = [torch.zeros(1, 2, 4 if flag else 8, 16) for flag in sliding]
        self.value_cache = [torch.zeros(1, 2, 4 if flag else 8, 16) for flag in sliding]


class StaticLayer:
    def __init__(self):
        self.keys, self.values = torch.zeros(1, 2, 8, 16), torch.zeros(1, 2, 8, 16)


class SlidingWindowLayer(StaticLayer):
    pass


class DynamicSlidingWindowLayer:
    def __init__(self):
        self.keys, self.values = torch.ones(1, 2, 3, 16), torch.ones(1, 2, 3, 16)


class Cache:
    """transformers 4.54+: cache.layers[i].keys / .values."""

    def __init__(self, layers):
        self.layers = layers


class CacheShapes(unittest.TestCase):
    """The recorder tells each layer's kind from the cache's own layout, without transformers."""

    def test_hybrid_cache_layers_are_rings_or_static_buffers(self):
        view = read_cache(HybridCache([True, False, True]))
        self.assertEqual(view.kinds, ["ring", "static", "ring"])
        self.assertEqual(list(view.keys(1).shape), [2, 8, 16])

    def test_layered_cache_kinds_follow_the_layer_classes(self):
        view = read_cache(Cache([StaticLayer(), SlidingWindowLayer(), DynamicSlidingWindowLayer()]))
        self.assertEqual(view.kinds, ["static", "ring", "append"])

    def test_unknown_and_batched_caches_are_refused(self):
        with self.assertRaises(kvscope_capture.CaptureError):
            read_cache(object())
        view = read_cache(((torch.zeros(2, 2, 3, 16), torch.zeros(2, 2, 3, 16)),))
        with self.assertRaisesRegex(kvscope_capture.CaptureError, "batch size 2"):
            view.keys(0)


class ReaderRefuses(unittest.TestCase):
    """Each cross-reference of the spec is checked: a broken copy of a good capture is refused."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.good = os.path.join(cls.directory.name, "good.kvcapture")
        target = model("llama-tiny")
        with kvscope_capture.Recorder(cls.good) as rec:
            rec.watch(target, role="target")
            cache = target(torch.tensor([PROMPT])).past_key_values
            target(torch.tensor([[9]]), past_key_values=cache)
        Capture(cls.good)  # the unbroken file is accepted

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def broken(self, change):
        tensors, metadata = read_tensors(self.good)
        manifest = json.loads(metadata["kvscope_capture"])
        change(manifest, tensors, metadata)
        metadata["kvscope_capture"] = json.dumps(manifest)
        path = os.path.join(self.directory.name, "broken.kvcapture")
        write_safetensors(path, tensors, metadata)
        with self.assertRaises(CaptureFormatError) as raised:
            Capture(path)
        return str(raised.exception)

    def test_row_id_out_of_range(self):
        def change(m, tensors, metadata):
            m["calls"][1]["after"]["layers"][0] = [[0, 7]]
        self.assertIn("rows 0..6 of 6", self.broken(change))

    def test_row_id_repeated_in_a_state(self):
        def change(m, tensors, metadata):
            m["calls"][1]["after"]["layers"][0] = [[0, 3], [2, 1]]
        self.assertIn("repeats", self.broken(change))

    def test_missing_and_unreferenced_tensors(self):
        self.assertIn("does not exist", self.broken(lambda m, t, meta: t.pop("target.call1.logits")))
        self.assertIn("no call or model references", self.broken(lambda m, t, meta: t.update(extra=torch.zeros(1))))

    def test_wrong_dtype_and_shape(self):
        def as_double(m, tensors, metadata):
            tensors["target.call0.logits"] = tensors["target.call0.logits"].double()
        self.assertIn("dtype F64", self.broken(as_double))

        def fewer_rows(m, tensors, metadata):
            m["calls"][0]["logits"]["rows"] = 4
        self.assertIn("expected (4, None)", self.broken(fewer_rows))

    def test_version_and_indices(self):
        self.assertIn("version", self.broken(lambda m, t, meta: meta.update(version="2")))
        self.assertIn("index", self.broken(lambda m, t, meta: m["calls"][1].update(index=5)))
        self.assertIn("positions", self.broken(lambda m, t, meta: m["calls"][1].update(positions=[1, 2])))


if __name__ == "__main__":
    unittest.main()
