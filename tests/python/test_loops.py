"""The correct loops decode exactly what greedy decoding of the target alone
does, in every cache shape; the buggy ones run."""
import unittest

import spec_loops
from fixtures import model, pair_cases, window_cases


class CorrectLoops(unittest.TestCase):
    def test_speculative_equals_target_greedy_in_every_cache_shape(self):
        target, drafter = model("llama-tiny"), model("llama-tiny-draft")
        for case in pair_cases():
            expected = case["ids"] + case["generated"]
            for shape in spec_loops.LOOPS["speculative"][1]:
                with self.subTest(prompt=case["prompt_name"], shape=shape):
                    self.assertEqual(spec_loops.speculative(target, drafter, case["ids"], 48, 4, shape), expected)

    def test_target_only_greedy_equals_the_fixture(self):
        for case in pair_cases():
            for shape in ("tuples", "static"):
                with self.subTest(prompt=case["prompt_name"], shape=shape):
                    self.assertEqual(spec_loops.greedy(model("llama-tiny"), case["ids"], 48, shape),
                                     case["ids"] + case["generated"])

    def test_hf_assisted_generation_matches_hf_tokens_and_call_counts(self):
        target, drafter = model("llama-tiny"), model("llama-tiny-draft")
        for case in pair_cases():
            for shape in spec_loops.LOOPS["hf-assisted"][1]:
                with self.subTest(prompt=case["prompt_name"], shape=shape):
                    target_calls, drafter_calls = CallCounter(target), CallCounter(drafter)
                    try:
                        tokens = spec_loops.hf_assisted(target, drafter, case["ids"], 48, 4, shape)
                    finally:
                        target_calls.restore()
                        drafter_calls.restore()
                    self.assertEqual(tokens, case["ids"] + case["assisted_generated"])
                    self.assertEqual(target_calls.count, case["assisted_target_forward_calls"])
                    self.assertEqual(drafter_calls.count, case["assistant_forward_calls"])

    def test_sliding_window_ring_equals_the_fixture_and_the_early_roll_does_not(self):
        mistral = model("mistral-sw-tiny")
        case = next(c for c in window_cases() if len(c["ids"]) < 16)  # a prompt inside the window
        expected = case["ids"] + case["generated"]
        self.assertEqual(spec_loops.greedy(mistral, case["ids"], 32, "ring"), expected)
        self.assertEqual(spec_loops.greedy(mistral, case["ids"], 32, "dynamic"), expected)
        self.assertNotEqual(spec_loops.greedy(mistral, case["ids"], 32, "ring", roll_early=True), expected)


class BuggyLoops(unittest.TestCase):
    def test_every_loop_runs_in_every_shape_it_names(self):
        target, drafter, mistral = model("llama-tiny"), model("llama-tiny-draft"), model("mistral-sw-tiny")
        prompt = pair_cases()[0]["ids"]
        for name, (_, shapes) in spec_loops.LOOPS.items():
            for shape in shapes:
                with self.subTest(loop=name, shape=shape):
                    window = name == "window-roll-early" or shape == "ring"
                    tokens = spec_loops.run_loop(name, mistral if window else target, None if window else drafter,
                                                 window_cases()[0]["ids"] if window else prompt, 20, shape)
                    self.assertEqual(len(tokens), len(window_cases()[0]["ids"] if window else prompt) + 20)

    def test_an_unknown_loop_or_shape_is_refused(self):
        with self.assertRaises(ValueError):
            spec_loops.check_loop("no-such-loop", "dynamic")
        with self.assertRaises(ValueError):
            spec_loops.check_loop("window-roll-early", "dynamic")


class CallCounter:
    """Counts a module's forward calls (an instance attribute, removed by restore())."""

    def __init__(self, module):
        self.module, self.count = module, 0
        original = module.forward

        def forward(*args, **kwargs):
            self.count += 1
            return original(*args, **kwargs)

        module.forward = forward

    def restore(self):
        del self.module.forward


if __name__ == "__main__":
    unittest.main()
