"""The recorded states show exactly what each loop did to its caches: the
correct loops keep docs/architecture.md's bookkeeping, each buggy loop leaves its own
trace, and a capture that missed a between-call change would be caught."""
import copy
import os
import tempfile
import unittest

import fixtures  # noqa: F401  (first: puts capture/python on sys.path)
import contract  # noqa: E402
from capture_loops import capture  # noqa: E402
from capture_reader import Capture  # noqa: E402


class CapturedLoops(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.captures = {}

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def load(self, loop, shape, **options):
        key = (loop, shape, tuple(sorted(options.items())))
        if key not in self.captures:
            path = os.path.join(self.directory.name, f"{loop}-{shape}-{len(self.captures)}.kvcapture")
            capture(loop, shape, path, **options)
            self.captures[key] = Capture(path)
        return self.captures[key]

    @staticmethod
    def rows(call, moment, layer=0):
        """Row ids held (empty slots left out)."""
        return [row for row in call[f"{moment}_ids"][layer] if row >= 0] if call[f"{moment}_ids"] else []

    def first_rejecting_round(self, c):
        """(verify call, n accepted, round start L) of the first target verify that rejected a draft."""
        committed = c.manifest["committed"]
        for call in c.calls("target")[1:]:
            drafts = call["input_ids"][1:]
            start = call["positions"][0] + 1
            n = next((i for i, d in enumerate(drafts) if committed[start + i] != d), len(drafts))
            if n < len(drafts):
                return call, n, start
        self.fail("no round rejected a draft")


class CorrectBookkeeping(CapturedLoops):
    def test_no_contract_breach_in_any_shape(self):
        for loop, shapes in (("speculative", ("tuples", "dynamic", "layers", "static")),
                             ("hf-assisted", ("tuples", "dynamic", "layers"))):
            for shape in shapes:
                c = self.load(loop, shape)
                for role in ("target", "drafter"):
                    with self.subTest(loop=loop, shape=shape, role=role):
                        self.assertEqual(contract.breaches(c, role), [])
                        self.assertEqual(contract.breaches(c, role, layer=1 if role == "target" else 0), [])

    def test_each_round_starts_with_L_minus_1_rows_and_prunes_to_L_plus_n(self):
        for shape in ("tuples", "dynamic", "layers", "static"):
            c = self.load("speculative", shape)
            targets = c.calls("target")
            for previous, call in zip(targets, targets[1:]):
                with self.subTest(shape=shape, call=call["index"]):
                    L = call["positions"][0] + 1  # the round's sequence length: the target feeds x[L-1] first
                    held = contract.attended_rows(call)
                    self.assertEqual(len(held), L - 1)
                    self.assertEqual(held, self.rows(previous, "after")[:L - 1])  # kept rows are the earlier ones

    def test_the_drafter_holds_L_minus_1_plus_gamma_at_verify_and_is_pruned_to_L_plus_n(self):
        for shape in ("tuples", "dynamic", "layers", "static"):
            c = self.load("speculative", shape)
            committed = c.manifest["committed"]
            calls = c.manifest["calls"]
            for position, verify in enumerate(calls):
                if verify["role"] != "target" or verify["index"] == 0 or len(verify["input_ids"]) == 1:
                    continue
                L, k = verify["positions"][0] + 1, len(verify["input_ids"]) - 1
                drafts = verify["input_ids"][1:]
                n = next((i for i, d in enumerate(drafts) if committed[L + i] != d), k)
                last_draft = next(call for call in reversed(calls[:position]) if call["role"] == "drafter")
                next_draft = next((call for call in calls[position:] if call["role"] == "drafter"), None)
                with self.subTest(shape=shape, round_start=L):
                    self.assertEqual(len(self.rows(last_draft, "after")), L - 1 + k)
                    if next_draft is not None:
                        self.assertEqual(len(contract.attended_rows(next_draft)), min(L - 1 + k, L + n))

    def test_pruning_between_calls_is_seen_as_crop_or_slice(self):
        expected = {"tuples": "slice", "dynamic": "crop", "layers": "crop"}
        for shape, kind in expected.items():
            c = self.load("speculative", shape)
            call, _, _ = self.first_rejecting_round(c)
            following = c.calls("target")[call["index"] + 1]
            with self.subTest(shape=shape):
                self.assertEqual(following["between"]["kind"], kind)
                self.assertLess(len(following["before_ids"][0]), len(call["after_ids"][0]))

    def test_hf_assistant_is_cropped_with_crop_and_fed_two_tokens(self):
        c = self.load("hf-assisted", "dynamic")
        shrinking = [call for call in c.calls("drafter") if call["between"] and call["between"]["kind"] != "none"]
        self.assertTrue(shrinking)
        self.assertEqual({call["between"]["kind"] for call in shrinking}, {"crop"})
        self.assertTrue(all(len(call["input_ids"]) == 2 for call in shrinking))

    def test_a_sliding_window_ring_rolls_once_full(self):
        c = self.load("greedy", "ring")
        by_position = {call["positions"][0]: call for call in c.calls("target")}
        self.assertEqual(by_position[15]["after"]["layers"][0], [[0, 16]])   # full: positions 0-15, no roll yet
        self.assertEqual(by_position[16]["after"]["layers"][0], [[1, 16]])   # rolled: row 0 out, row 16 in
        self.assertEqual(by_position[16]["after"]["kinds"], ["ring"] * 3)


class BuggyLoopsLeaveTheirTrace(CapturedLoops):
    def test_prefix_fed_again_with_a_non_empty_cache(self):
        c = self.load("prefix-refed", "dynamic")
        committed = c.manifest["committed"]
        call = next(call for call in c.calls("drafter") if self.rows(call, "before") and len(call["input_ids"]) > 2)
        held = len(self.rows(call, "before"))
        self.assertEqual(call["input_ids"], committed[:len(call["input_ids"])])  # the whole prefix again
        self.assertEqual(call["positions"][0], held)                               # after the rows it already has
        self.assertEqual(contract.breaches(c, "target"), [])                     # the target is not affected

    def test_target_prune_keeps_one_rejected_draft(self):
        for shape in ("dynamic", "static"):
            c = self.load("keep-one-rejected", shape)
            verify, n, L = self.first_rejecting_round(c)
            following = c.calls("target")[verify["index"] + 1]
            held = contract.attended_rows(following)
            with self.subTest(shape=shape):
                self.assertEqual(len(held), L + n + 1)          # one row more than the L+n required
                extra = contract.written_rows(c, "target")[held[-1]]
                self.assertEqual(extra[:2], (verify["input_ids"][n + 1], L + n))  # the first rejected draft
                self.assertEqual(contract.breaches(c, "target")[0][0], following["index"])

    def test_reset_instead_of_rollback_leaves_no_rows(self):
        for shape in ("tuples", "static"):
            c = self.load("reset-not-rollback", shape)
            verify, _, _ = self.first_rejecting_round(c)
            following = c.calls("target")[verify["index"] + 1]
            with self.subTest(shape=shape):
                self.assertEqual(self.rows(following, "before"), [])
                self.assertEqual(following["positions"][0], 0)
                self.assertEqual(following["between"]["kind"], "reset")
                self.assertEqual(contract.breaches(c, "target")[0][0], following["index"])

    def test_crop_of_zero_treated_as_a_no_op_keeps_the_rejected_drafts(self):
        c = self.load("crop0-noop", "dynamic")
        verify, n, L = self.first_rejecting_round(c)
        self.assertEqual(n, 0)
        following = c.calls("target")[verify["index"] + 1]
        self.assertEqual(following["between"]["kind"], "none")
        self.assertEqual(self.rows(following, "before"), self.rows(verify, "after"))  # all L+gamma rows stay
        self.assertEqual(contract.breaches(c, "target")[0][0], following["index"])

    def test_positions_advance_by_one_after_a_multi_token_accept(self):
        c = self.load("positions-plus-one", "dynamic")
        committed = c.manifest["committed"]
        calls = c.calls("target")
        accepting = next(call for call in calls[1:] if call["input_ids"][1] == committed[call["positions"][0] + 1])
        following = calls[accepting["index"] + 1]
        self.assertEqual(following["positions_source"], "position_ids")
        self.assertLess(following["positions"][0], len(self.rows(following, "before")))  # positions repeat
        self.assertEqual(contract.breaches(c, "target")[0], (following["index"], "positions have a gap or a repeat"))

    def test_verify_without_causal_mask_among_the_drafts(self):
        leaky, correct = self.load("verify-mask-leak", "dynamic"), self.load("speculative", "dynamic")
        verify = leaky.calls("target")[1]
        mask = leaky.tensors[verify["attention_mask"]["tensor"]]
        self.assertEqual(verify["attention_mask"]["kind"], "explicit")
        self.assertEqual(list(mask.shape), [len(verify["input_ids"]), len(verify["after_ids"][0])])
        self.assertTrue(bool(mask.all()))  # the first draft sees the later ones
        self.assertIsNone(correct.calls("target")[1]["attention_mask"])
        new_rows = self.rows(verify, "after")[-len(verify["input_ids"]):]
        same_rows = self.rows(correct.calls("target")[1], "after")[-len(verify["input_ids"]):]
        for layer, equal in ((0, True), (1, False)):  # layer 0's K/V need no attention; layer 1's come from leaked attention
            leaked = leaky.rows["target"][layer][0][:, new_rows]
            self.assertEqual(bool((leaked == correct.rows["target"][layer][0][:, same_rows]).all()), equal)

    def test_ring_buffer_rolls_one_step_early(self):
        early, correct = self.load("window-roll-early", "ring"), self.load("greedy", "ring")
        at_15 = next(call for call in early.calls("target") if call["positions"] == [15])
        after = at_15["after_ids"][0]
        self.assertNotIn(0, after)   # position 0 dropped while still inside the window of 16
        self.assertIn(-1, after)     # and an empty (zero) slot is attended instead
        self.assertEqual(at_15["after"]["layers"][0], [[1, 14], [-1, 1], [15, 1]])
        correct_15 = next(call for call in correct.calls("target") if call["positions"] == [15])
        self.assertEqual(correct_15["after"]["layers"][0], [[0, 16]])

    def test_bonus_token_never_fed_to_the_drafter(self):
        c = self.load("bonus-not-fed", "dynamic")
        committed = c.manifest["committed"]
        drafter_rows = set(row[:2] for row in contract.written_rows(c, "drafter").values())
        all_accepted = [call for call in c.calls("target")[1:] if len(call["input_ids"]) > 1
                        and call["input_ids"][1:] == committed[call["positions"][1]:call["positions"][-1] + 1]]
        self.assertTrue(all_accepted, "no round accepted every draft")
        for verify in all_accepted:
            bonus_position = verify["positions"][-1] + 1
            with self.subTest(bonus_position=bonus_position):
                self.assertNotIn((committed[bonus_position], bonus_position), drafter_rows)
                # a draft sits where the bonus belongs
                self.assertTrue(any(position == bonus_position for _, position in drafter_rows))


class NegativeControl(CapturedLoops):
    def test_a_capture_that_missed_the_slicing_between_calls_is_caught(self):
        """A recorder that read the cache only after each call (and assumed the next
        call saw the same) would have written before = the previous after. The same
        checks that pass on the real capture must fail on that one."""
        real = self.load("speculative", "tuples")
        self.assertEqual(contract.breaches(real, "target"), [])
        blind = copy.deepcopy(real)
        previous = {}
        for call in blind.manifest["calls"]:
            if call["role"] in previous:
                call["before_ids"] = previous[call["role"]]
            previous[call["role"]] = call["after_ids"]
        verify, _, _ = self.first_rejecting_round(real)
        self.assertEqual(contract.breaches(blind, "target")[0][0], verify["index"] + 1)


if __name__ == "__main__":
    unittest.main()
