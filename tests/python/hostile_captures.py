"""Hostile captures through the real kvscope-cli (and the GUI), one case per
class of file that once got past CaptureFile::open and then cost the check or
the GUI gigabytes, minutes, a backtrace or a silent "ok": slot counts summed
over layers and calls, a 1 MB engine name, positions of INT64_MAX, top-k ids
of -7 or 2^31 - 1 without a vocab_size, ids past the model's vocabulary, and
error text that is huge or holds terminal and bidi controls.

Each case runs `kvscope-cli check` once and must:
  - exit with the case's status (2: refused, naming the problem), never 0 with
    rows skipped unsaid, 3 ("internal error") or a signal;
  - print an `error:` line holding the case's `expect` strings;
  - print no raw control or bidi character and no line over 5,000 bytes;
  - stay within CPU_BUDGET_S of CPU time and PEAK_BUDGET_MB of peak RSS
    (libtorch alone takes ~300 MB).
With --gui, `kvscope FILE --screenshot OUT` (offscreen) must exit within the
GUI's budgets: 0 with the screenshot written for a capture that opens, non-zero
with the error on stderr for one that does not.

The files come from fuzz/regression/capture/ (fuzz/make_capture_regression.py)
and from hostile edits of tests/fixtures/captures/, checked against the fixture
models. Run by ctest as `hostile_captures`; by hand:
  /usr/bin/python3 tests/python/hostile_captures.py --cli build/app/kvscope-cli
      [--gui build/app/kvscope] [-k SUBSTRING] [-v]
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE_DIR / "fuzz"))
from make_capture_regression import encode  # noqa: E402  (the corpus's own encoder)
from measured_process import run_measured  # noqa: E402
CORPUS = SOURCE_DIR / "fuzz" / "regression" / "capture"
FIXTURES = SOURCE_DIR / "tests" / "fixtures"
MODELS = FIXTURES / "models"
CPU_BUDGET_S = 5.0
PEAK_BUDGET_MB = 1536
# The GUI starts Qt and loads the bundled models before it opens the file.
GUI_CPU_BUDGET_S = 30.0
WALL_TIMEOUT_S = 120
MAX_LINE_BYTES = 5000
RAW_CONTROLS = [b"\x1b", "\u202e".encode(), "\u2066".encode(), b"\x07"]

# --- files -------------------------------------------------------------------


def read_capture(path):
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    manifest = json.loads(header["__metadata__"]["kvscope_capture"])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], data[8 + n + begin:8 + n + end])
    return header["__metadata__"]["version"], manifest, tensors


def write_capture(path, version, manifest, tensors):
    Path(path).write_bytes(encode(manifest, tensors, version))


def edited_fixture(name, change):
    """A writer of the fixture capture `name` with `change(manifest, tensors)` applied."""
    def write(path):
        version, manifest, tensors = read_capture(FIXTURES / "captures" / (name + ".kvcapture"))
        change(manifest, tensors)
        write_capture(path, version, manifest, tensors)
    return write


def corpus_file(name):
    return lambda path: shutil.copyfile(CORPUS / name, path)


def without_vocab_size(manifest):
    for model in manifest["models"].values():
        model["config"]["vocab_size"] = None


def top_id(value):
    """Without a vocab_size, the first top id of target call 1 becomes `value`."""
    def change(manifest, tensors):
        without_vocab_size(manifest)
        dtype, shape, raw = tensors["target.call1.top_ids"]
        tensors["target.call1.top_ids"] = (dtype, shape, struct.pack("<i", value) + raw[4:])
    return change


def input_id(value):
    def change(manifest, tensors):
        without_vocab_size(manifest)
        manifest["calls"][-1]["input_ids"][0] = value
    return change


def named_model(name):
    def change(manifest, tensors):
        manifest["models"]["target"]["name_or_path"] = name
    return change


class Case:
    def __init__(self, name, cls, write, expect, status=2, models=True, argv=None, gui=None):
        self.name = name
        self.cls = cls
        self.write = write  # path -> None: writes the capture
        self.expect = expect if isinstance(expect, list) else [expect]
        self.status = status
        self.models = models  # pass --target/--drafter (the fixture models)
        self.argv = argv  # the check's arguments ({file}: the capture), default: check {file}
        self.gui = gui  # None: no GUI run; "opens" or "fails"


SPECULATIVE = "verify-mask-leak-dynamic-topk"


def all_cases():
    per_state = "the limit is 1048576 per state"
    return [
        Case("static_6_layers_2_24_slots", "slots", corpus_file("hostile_static_6_layers_2_24_slots"),
             ["before.layers[0]", per_state], gui="fails"),
        Case("static_6_layers_2_18_slots", "slots", corpus_file("hostile_static_6_layers_2_18_slots"),
             ["before.layers[4]", per_state]),
        Case("static_1024_layers_2_24_slots", "slots", corpus_file("hostile_static_1024_layers_2_24_slots"),
             ["before.layers[0]", per_state]),
        Case("slots_across_calls", "slots", corpus_file("hostile_slots_across_calls"),
             ["slots of the capture's states", "the limit is 16777216"]),
        Case("engine_name_1mb", "free-text", corpus_file("hostile_engine_name_1mb"),
             "engine.name is 1048576 bytes long, the limit is 4096", gui="fails"),
        Case("cache_position_int64_max", "positions", corpus_file("hostile_cache_position_int64_max"),
             ["cache_position", "9223372036854775807"], gui="fails"),
        Case("fixture_cache_position_int64_max", "positions",
             edited_fixture("greedy-static-full",
                            lambda m, t: m["calls"][1].update(cache_position=[(1 << 63) - 1],
                                                              positions_source="position_ids")),
             ["call 1 (target index 1): cache_position", "9223372036854775807"]),
        Case("top_ids_negative_without_vocab", "top-k-ids", corpus_file("hostile_top_ids_negative"),
             ["logits top id -7", "no vocab_size given"]),
        Case("top_ids_2_31_minus_1_without_vocab", "top-k-ids", corpus_file("hostile_top_ids_2_31_minus_1"),
             ["logits top id 2147483647"]),
        Case("fixture_top_id_negative_without_vocab", "top-k-ids", edited_fixture(SPECULATIVE, top_id(-7)),
             ["logits top id -7"]),
        Case("fixture_top_id_2_31_minus_1_without_vocab", "top-k-ids",
             edited_fixture(SPECULATIVE, top_id((1 << 31) - 1)), ["logits top id 2147483647"]),
        # Inside the format's largest vocabulary, past the model's: once every
        # logit row was skipped and the check said "ok".
        Case("fixture_top_id_past_model_vocab", "top-k-ids", edited_fixture(SPECULATIVE, top_id(600)),
             ["target call 1's logits name top id 600", "vocabulary has 512 ids"], gui="fails"),
        # Within every limit, the largest state (2^20 slots) with every slot
        # attended: the fixture model is refused (another shape) before the walk.
        Case("largest_state_attended", "slots", corpus_file("hostile_static_2_20_slots_attended"),
             "is not the target this capture ran"),
        # A capture that opens: the GUI shows it and --screenshot exits 0.
        Case("valid_static_opens", "screenshot", corpus_file("hostile_valid_static"),
             "is not the target this capture ran", gui="opens"),
        Case("fixture_input_id_past_model_vocab", "token-ids", edited_fixture(SPECULATIVE, input_id(700)),
             ["input_ids holds token id 700", "vocabulary has 512 ids"]),
        Case("fixture_bidi_and_escape_in_model_name", "error-text",
             edited_fixture(SPECULATIVE, named_model("/nonexistent/\u202e\x1b[31mlaedom\x07")),
             ["\\u202e\\x1b[31mlaedom\\x07", "not a model directory here"], models=False,
             argv=["check", "{file}", "--require-model"]),
        Case("long_error_clipped", "error-text", corpus_file("hostile_valid_static"),
             ["bytes more)"], models=False, argv=["check", "{file}", "--target", "/nonexistent/" + "d" * 100000]),
    ]


# --- running -----------------------------------------------------------------


def run(argv, scratch, env):
    """(status, stdout, stderr, cpu s, peak MB) or None for a timeout."""
    return run_measured(argv, scratch, env, WALL_TIMEOUT_S)


def text_problems(stream, name):
    problems = []
    for raw in RAW_CONTROLS:
        if raw in stream:
            problems.append("a raw %r reached %s" % (raw, name))
    longest = max((len(line) for line in stream.split(b"\n")), default=0)
    if longest > MAX_LINE_BYTES:
        problems.append("a %d-byte line on %s" % (longest, name))
    return problems


def model_options(capture):
    """--target (and --drafter when the capture has one): the fixture models the fixture captures ran.
    A file the reader refuses gets them too: the refusal must come first."""
    options = ["--target", str(MODELS / "llama-tiny")]
    try:
        has_drafter = "drafter" in read_capture(capture)[1]["models"]
    except (ValueError, KeyError):
        has_drafter = False
    return options + (["--drafter", str(MODELS / "llama-tiny-draft")] if has_drafter else [])


def check_cli(cli, case, root):
    scratch = root / case.name
    scratch.mkdir(parents=True, exist_ok=True)
    capture = scratch / "capture.kvcapture"
    case.write(capture)
    argv = [a.replace("{file}", str(capture)) for a in (case.argv or ["check", "{file}"])]
    if case.models:
        argv += model_options(capture)
    result = run([cli] + argv, scratch, dict(os.environ, OMP_NUM_THREADS="1"))
    if result is None:
        return ["no answer within %d s" % WALL_TIMEOUT_S], ""
    status, out, err, cpu, peak = result
    problems = []
    if status != case.status:
        problems.append("exit status %s, expected %s" % (status, case.status))
    text = err.decode(errors="replace")
    if "internal error" in text:
        problems.append('printed "internal error"')
    if "every call kept the cache contract" in out.decode(errors="replace"):
        problems.append('said "every call kept the cache contract"')
    errors = "\n".join(line for line in text.splitlines() if "error" in line)
    for expected in case.expect:
        if expected not in errors:
            problems.append("no %r in the error" % expected)
    problems += text_problems(err, "stderr") + text_problems(out, "stdout")
    if cpu > CPU_BUDGET_S:
        problems.append("%.1f s of CPU, over the %.0f s budget" % (cpu, CPU_BUDGET_S))
    if peak > PEAK_BUDGET_MB:
        problems.append("peak RSS %.0f MB, over the %d MB budget" % (peak, PEAK_BUDGET_MB))
    line = next((l for l in text.splitlines() if "error" in l), text.strip()[:200])
    return problems, "%5.2f s %5.0f MB  %s" % (cpu, peak, line[:200])


def check_gui(gui, case, root):
    scratch = root / (case.name + "-gui")
    scratch.mkdir(parents=True, exist_ok=True)
    capture = scratch / "capture.kvcapture"
    case.write(capture)
    shot = scratch / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", OMP_NUM_THREADS="1", HOME=str(scratch))
    # Both fixture models always: without --drafter the GUI loads the bundled
    # one, whose vocabulary is not llama-tiny's.
    argv = [gui, str(capture), "--screenshot", str(shot), "--target", str(MODELS / "llama-tiny"),
            "--drafter", str(MODELS / "llama-tiny-draft")]
    result = run(argv, scratch, env)
    if result is None:
        return ["the GUI gave no answer within %d s" % WALL_TIMEOUT_S], ""
    status, out, err, cpu, peak = result
    problems = []
    text = err.decode(errors="replace")
    if case.gui == "opens":
        if status != 0 or not shot.exists():
            problems.append("exit status %s, screenshot %s: expected 0 and a screenshot"
                            % (status, "written" if shot.exists() else "missing"))
    else:
        if status == 0:
            problems.append("exit status 0 for a capture that does not open")
        if "Opening the capture failed" not in text:
            problems.append("no 'Opening the capture failed' on stderr")
        for expected in case.expect:
            if expected not in text:
                problems.append("no %r on stderr" % expected)
    if "Exception raised from" in text or "frame #" in text:
        problems.append("a libtorch backtrace on stderr")
    problems += text_problems(err, "stderr")
    if cpu > GUI_CPU_BUDGET_S:
        problems.append("%.1f s of CPU, over the GUI's %.0f s budget" % (cpu, GUI_CPU_BUDGET_S))
    if peak > PEAK_BUDGET_MB:
        problems.append("peak RSS %.0f MB, over the %d MB budget" % (peak, PEAK_BUDGET_MB))
    line = next((l for l in text.splitlines() if "failed" in l), "")
    return problems, "%5.2f s %5.0f MB  GUI exit %s %s" % (cpu, peak, status, line[:160])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.environ.get("KVSCOPE_CLI"), help="the kvscope-cli binary")
    parser.add_argument("--gui", default=os.environ.get("KVSCOPE_GUI"), help="the kvscope binary (optional)")
    parser.add_argument("-k", dest="only", help="run only cases whose name or class contains this")
    parser.add_argument("-v", dest="verbose", action="store_true", help="print every case's error line")
    args = parser.parse_args()
    if not args.cli:
        parser.error("give --cli or $KVSCOPE_CLI")
    cases = [c for c in all_cases() if not args.only or args.only in c.name or args.only in c.cls]
    assert len({c.name for c in cases}) == len(cases), "case names repeat"
    root = Path(tempfile.mkdtemp(prefix="kvscope-hostile-captures-"))
    failed = runs = 0
    try:
        for case in cases:
            checks = [("cli", check_cli, args.cli)]
            if args.gui and case.gui:
                checks.append(("gui", check_gui, args.gui))
            for kind, check, binary in checks:
                runs += 1
                problems, line = check(binary, case, root)
                if problems:
                    failed += 1
                    print("FAIL %s %s (%s): %s\n     %s" % (kind, case.name, case.cls, "; ".join(problems), line))
                elif args.verbose:
                    print("ok   %s %-42s %s" % (kind, case.name, line))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("%d runs, %d failed" % (runs, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
