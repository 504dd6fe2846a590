"""The test engine's forward equals the fixtures' HF reference logits."""
import unittest

import torch

from fixtures import fixture_json, model
from hf_caches import DynamicCache

TOLERANCE = 1e-4


def logits_all_at_once(m, ids):
    with torch.no_grad():
        return m(ids, use_cache=False).logits[0]  # [n, vocab]


def logits_one_by_one(m, ids, cache):
    rows = []
    with torch.no_grad():
        for i in range(ids.shape[1]):
            out = m(ids[:, i:i + 1], past_key_values=cache)
            cache = out.past_key_values
            rows.append(out.logits[0, -1])
    return torch.stack(rows)


def prefill_then_step(m, ids):
    with torch.no_grad():
        out = m(ids[:, :-1], past_key_values=DynamicCache())
        return m(ids[:, -1:], past_key_values=out.past_key_values).logits[0]


class ReferenceForward(unittest.TestCase):
    def check_model(self, name):
        m = model(name)
        for case in fixture_json("logits", f"{name}.json")["cases"]:
            ids = torch.tensor([case["ids"]])
            modes = {"nocache": logits_all_at_once(m, ids),
                     "cached": logits_one_by_one(m, ids, DynamicCache()),
                     "prefill_then_step": prefill_then_step(m, ids)}
            for mode, logits in modes.items():
                with self.subTest(model=name, case=case["name"], mode=mode):
                    expected = torch.tensor(case[mode]["last_logits"])
                    self.assertLess(float((logits[-1] - expected).abs().max()), TOLERANCE)
                    if mode != "prefill_then_step":
                        self.assertEqual(logits.argmax(-1).tolist(), case[mode]["argmax"])
                    if "all_logits" in case[mode]:
                        self.assertLess(float((logits - torch.tensor(case[mode]["all_logits"])).abs().max()), TOLERANCE)

    def test_llama_tiny(self):
        self.check_model("llama-tiny")

    def test_llama_tiny_draft(self):
        self.check_model("llama-tiny-draft")

    def test_mistral_sliding_window(self):
        self.check_model("mistral-sw-tiny")

    def test_legacy_tuples_cache_gives_the_same_logits(self):
        m = model("llama-tiny")
        ids = torch.tensor([fixture_json("logits", "llama-tiny.json")["cases"][1]["ids"]])
        self.assertTrue(torch.equal(logits_one_by_one(m, ids, None), logits_one_by_one(m, ids, DynamicCache())))


if __name__ == "__main__":
    unittest.main()
