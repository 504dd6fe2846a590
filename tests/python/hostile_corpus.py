"""The hostile-input regression corpus, generated and replayed.

Every input class hostile testing found accepted and then
computing nonsense (or failing as an "internal error") is a table of cases
here: model configs that made NaN logits or silently read the wrong thing,
configs with fewer layers than the checkpoint, ids beyond the vocabulary,
duplicate JSON keys (config, generation config, tokenizer files, shard
index), integers written as floats or too large, make-model shapes too big
for memory, unbounded text files, and the parameter sets of `compress` and
`explain`. The cases are generated from the fixture models (so they stay
valid apart from the one hostile field) instead of committed one file each:
the table says what each changes and what it must be refused with.

Each case runs the real kvscope-cli once and must:
  - exit with status 2 (a refusal), not 0, 3 ("internal error") or a signal;
  - print an `error:` line on stderr that names the field or flag (the
    case's `expect` strings, all of them);
  - never print "internal error";
  - stay within CPU_BUDGET_S of CPU time and PEAK_BUDGET_MB of peak RSS
    (libtorch alone takes ~300 MB; the inputs once asked for terabytes).

Run by ctest as `hostile_corpus`; by hand:
  /usr/bin/python3 tests/python/hostile_corpus.py --cli build/app/kvscope-cli
      [--write DIR] [-k SUBSTRING] [-v]
--write DIR keeps the generated inputs there (to inspect or share them);
-v prints every case's error line.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from measured_process import run_measured

SOURCE_DIR = Path(__file__).resolve().parents[2]
FIXTURES = SOURCE_DIR / "tests" / "fixtures" / "models"
CPU_BUDGET_S = 10.0
PEAK_BUDGET_MB = 1024
WALL_TIMEOUT_S = 120

# --- generated inputs --------------------------------------------------------


def fixture_config(model):
    return json.loads((FIXTURES / model / "config.json").read_text())


def with_fields(model, **fields):
    """The fixture's config.json with `fields` replaced (None deletes)."""
    config = fixture_config(model)
    for key, value in fields.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return json.dumps(config, indent=1)


def with_raw_field(model, key, raw):
    """The fixture's config.json with `key` written as the raw JSON text `raw`
    (2.0 stays 2.0, 1e300 stays 1e300)."""
    config = fixture_config(model)
    config[key] = "@@RAW@@"
    return json.dumps(config, indent=1).replace('"@@RAW@@"', raw)


def with_duplicate(model, key, first):
    """The fixture's config.json with `key` written twice: `first`, then the real value."""
    text = json.dumps(fixture_config(model), indent=1)
    return text.replace("{", "{\n \"%s\": %s," % (key, json.dumps(first)), 1)


class Case:
    def __init__(self, name, cls, argv, expect, model=None, files=None, scratch=None):
        self.name = name
        self.cls = cls
        self.argv = argv  # "{model}" is replaced by the case's model directory, "{dir}" by its scratch dir
        self.expect = expect if isinstance(expect, list) else [expect]
        self.model = model  # fixture the model directory is made from (None: no model directory)
        # name -> text written into the model directory over the fixture's (None: the file is left out)
        self.files = files or {}
        # name -> text, or ("sparse", size), written into the scratch directory
        self.scratch = scratch or {}


def model_case(name, cls, model, files, expect, command=("inspect", "{model}")):
    return Case(name, cls, list(command), expect, model=model, files=files)


def config_cases():
    llama, phi3, gemma = "llama-tiny", "phi3-longrope-tiny", "gemma2-tiny"
    longrope = fixture_config(phi3)["rope_scaling"]
    cases = []

    def config(name, cls, model, text, expect):
        cases.append(model_case(name, cls, model, {"config.json": text}, expect))

    # Configs that validated and then gave NaN or all-zero logits.
    config("longrope_original_context_1", "nan-config", phi3,
           with_fields(phi3, original_max_position_embeddings=1), "'original_max_position_embeddings'")
    for index, value in [(0, 1e-300), (3, 0.0), (5, -1.0), (7, 1e7)]:
        for which in ["short_factor", "long_factor"]:
            scaling = json.loads(json.dumps(longrope))
            scaling[which][index] = value
            config("longrope_%s_%d_%g" % (which, index, value), "nan-config", phi3,
                   with_fields(phi3, rope_scaling=scaling), "'rope_scaling.%s[%d]'" % (which, index))
    for value in [1e-300, 0.5, -1.0, 1e7]:
        config("gemma2_final_softcap_%g" % value, "nan-config", gemma,
               with_fields(gemma, final_logit_softcapping=value), "'final_logit_softcapping'")
        config("gemma2_attn_softcap_%g" % value, "nan-config", gemma,
               with_fields(gemma, attn_logit_softcapping=value), "'attn_logit_softcapping'")
    for value in [0, -1e-6, 1e-300, 2.0]:
        config("rms_norm_eps_%g" % value, "nan-config", llama, with_fields(llama, rms_norm_eps=value),
               ["'rms_norm_eps' must be a finite number in [1e-30, 1]"])
    config("layer_norm_epsilon_0", "nan-config", "gpt2-tiny", with_fields("gpt2-tiny", layer_norm_epsilon=0),
           ["'layer_norm_epsilon' must be a finite number in [1e-30, 1]"])
    for value in [0.5, 1e-6, 0, -10000, 1e13]:
        config("rope_theta_%g" % value, "nan-config", llama, with_fields(llama, rope_theta=value),
               ["'rope_theta' must be a finite number in [1, 1e+12]"])
    config("rope_theta_1e999", "nan-config", llama, with_raw_field(llama, "rope_theta", "1e999"),
           ["number overflow", "1e999"])
    for factor in [1e-300, 0, 1e7]:
        config("linear_rope_factor_%g" % factor, "nan-config", llama,
               with_fields(llama, rope_scaling={"type": "linear", "factor": factor}), "'factor'")
    config("llama3_low_freq_factor_tiny", "nan-config", llama,
           with_fields(llama, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1e-300,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
           "'low_freq_factor'")
    config("gemma2_query_pre_attn_scalar_0", "nan-config", gemma,
           with_fields(gemma, query_pre_attn_scalar=0), "'query_pre_attn_scalar'")

    # The checkpoint and the config disagree.
    config("fewer_layers_than_checkpoint", "fewer-layers", llama, with_fields(llama, num_hidden_layers=1),
           ["does not account for", "num_hidden_layers"])
    config("more_layers_than_checkpoint", "fewer-layers", llama, with_fields(llama, num_hidden_layers=3),
           "model.layers.2.")

    # Ids beyond the vocabulary (llama-tiny's vocab_size is 512).
    config("eos_beyond_vocab", "eos-beyond-vocab", llama, with_fields(llama, eos_token_id=512), "'eos_token_id' holds 512")
    config("eos_list_beyond_vocab", "eos-beyond-vocab", llama, with_fields(llama, eos_token_id=[2, 100000]),
           "'eos_token_id' holds 100000")
    config("bos_beyond_vocab", "eos-beyond-vocab", llama, with_fields(llama, bos_token_id=4096), "'bos_token_id' holds 4096")
    config("eos_negative", "eos-beyond-vocab", llama, with_fields(llama, eos_token_id=-1), "eos_token_id")
    cases.append(model_case("generation_config_eos_beyond_vocab", "eos-beyond-vocab", llama,
                            {"generation_config.json": json.dumps({"eos_token_id": [2, 9999]})},
                            ["generation_config.json", "'eos_token_id' holds 9999"]))

    # Integers written as floats, strings or numbers no field can hold.
    for key, raw in [("num_hidden_layers", "2.0"), ("num_hidden_layers", "2.5"), ("num_hidden_layers", "1e300"),
                     ("hidden_size", "\"64\""), ("vocab_size", "-1"), ("vocab_size", "512.0"),
                     ("num_attention_heads", "1e20"), ("intermediate_size", "true"),
                     ("max_position_embeddings", "0"), ("num_key_value_heads", "18446744073709551616"),
                     ("head_dim", "0"), ("eos_token_id", "2.0")]:
        config("float_integer_%s_%s" % (key, raw.strip('"')), "float-integer", llama, with_raw_field(llama, key, raw), key)
    # Only Mistral reads sliding_window (Llama ignores it, as Hugging Face does).
    mistral = "mistral-sw-tiny"
    for raw in ["1.5", "0", "-4096"]:
        config("float_integer_sliding_window_%s" % raw, "float-integer", mistral,
               with_raw_field(mistral, "sliding_window", raw), "sliding_window")
    return cases


def duplicate_key_cases():
    llama = "llama-tiny"
    text = json.dumps(fixture_config(llama), indent=1)
    nested = text.replace('"rope_scaling": null', '"rope_scaling": {"type": "linear", "factor": 2.0, "factor": 8.0}')
    tokenizer = (FIXTURES / llama / "tokenizer.json").read_text()
    vocab_at = tokenizer.index('"vocab"')
    vocab_open = tokenizer.index("{", vocab_at) + 1
    tokenizer_dup_vocab = tokenizer[:vocab_open] + '"<unk>": 7, ' + tokenizer[vocab_open:]
    tokenizer_dup_top = tokenizer.replace("{", '{"normalizer": null, ', 1)
    if '"normalizer"' not in tokenizer:
        tokenizer_dup_top = tokenizer.replace("{", '{"decoder": null, ', 1)
    return [
        model_case("config_key_twice", "duplicate-key", llama,
                   {"config.json": with_duplicate(llama, "num_hidden_layers", 24)},
                   "duplicate key 'num_hidden_layers' in the object at /"),
        model_case("config_nested_key_twice", "duplicate-key", llama, {"config.json": nested},
                   "duplicate key 'factor' in the object at /rope_scaling"),
        model_case("generation_config_key_twice", "duplicate-key", llama,
                   {"generation_config.json": '{"eos_token_id": 2, "eos_token_id": 3}'},
                   ["generation_config.json", "duplicate key 'eos_token_id'"]),
        model_case("tokenizer_vocab_token_twice", "duplicate-key", llama, {"tokenizer.json": tokenizer_dup_vocab},
                   ["tokenizer.json", "duplicate key '<unk>' in the object at /model/vocab"]),
        model_case("tokenizer_section_twice", "duplicate-key", llama, {"tokenizer.json": tokenizer_dup_top},
                   ["tokenizer.json", "duplicate key"]),
        model_case("tokenizer_config_key_twice", "duplicate-key", llama,
                   {"tokenizer_config.json": '{"bos_token": "<s>", "bos_token": "</s>"}'},
                   ["tokenizer_config.json", "duplicate key 'bos_token'"]),
        model_case("shard_index_tensor_twice", "duplicate-key", llama,
                   {"model.safetensors.index.json": json.dumps({"metadata": {}, "weight_map": {}}).replace(
                       '"weight_map": {}',
                       '"weight_map": {"model.norm.weight": "a.safetensors", "model.norm.weight": "b.safetensors"}'),
                    "model.safetensors": None},
                   ["model.safetensors.index.json", "duplicate key 'model.norm.weight' in the object at /weight_map"]),
    ]


def make_model_cases():
    huge = fixture_config("llama-tiny")
    huge.update({"vocab_size": 1 << 24, "hidden_size": 1 << 20, "intermediate_size": 1 << 20,
                 "num_attention_heads": 1024, "num_key_value_heads": 1024, "bos_token_id": 1})
    wide = fixture_config("llama-tiny")
    wide.update({"num_hidden_layers": 4096, "hidden_size": 65536, "intermediate_size": 1 << 20,
                 "num_attention_heads": 512, "num_key_value_heads": 512})
    cases = []
    for name, config in [("make_model_64tb", huge), ("make_model_4096_wide_layers", wide)]:
        cases.append(Case(name, "huge-make-model", ["make-model", "--shape", "{dir}/shape.json", "--out", "{dir}/out"],
                          ["shape.json", "parameters", "needs about", "(the limit)"],
                          scratch={"shape.json": json.dumps(config)}))
    for value in ["-1", "1.5", "99999999999999999999"]:
        cases.append(Case("make_model_seed_%s" % value, "cli-parameters",
                          ["make-model", "--shape", "bundled-drafter", "--out", "{dir}/out", "--seed", value], "--seed"))
    return cases


def text_file_cases():
    def compress(path):
        return ["compress", "--model", "{model}", "--prompt-ids", "5,6,7", "--text-file", path, "--policy", "streaming"]
    return [
        Case("text_file_dev_zero", "dev-zero", compress("/dev/zero"), ["/dev/zero", "longer than the limit of 16777216 bytes"],
             model="llama-tiny"),
        Case("text_file_sparse_16mib_plus_1", "dev-zero", compress("{dir}/big.txt"),
             ["big.txt", "16777217 bytes exceed the limit of 16777216 bytes for --text-file"], model="llama-tiny",
             scratch={"big.txt": ("sparse", (16 << 20) + 1)}),
    ]


def explain_cases():
    base = ["explain", "--model", "{model}", "--prompt-ids", "5,6,7,8,9,10,11,12,13,14"]
    sets = [
        (["--layer", "2", "--head", "0"], "option --layer: 2 is out of range"),
        (["--layer", "-1", "--head", "0"], "option --layer: -1 is out of range"),
        (["--layer", "1.5", "--head", "0"], "option --layer expects an integer, got '1.5'"),
        (["--layer", "1e3", "--head", "0"], "option --layer expects an integer"),
        (["--layer", "99999999999999999999", "--head", "0"], "option --layer: '99999999999999999999' does not fit"),
        (["--layer", "+1", "--head", "0"], "option --layer expects an integer"),
        (["--layer", " 1", "--head", "0"], "option --layer expects an integer"),
        (["--layer", "", "--head", "0"], "--layer"),
        (["--layer", "0x1", "--head", "0"], "option --layer expects an integer"),
        (["--layer", "0", "--head", "4"], "option --head: 4 is out of range"),
        (["--layer", "0", "--head", "-1"], "option --head: -1 is out of range"),
        (["--layer", "0", "--head", "nan"], "option --head expects an integer"),
        (["--layer", "0", "--head", "9223372036854775807"], "option --head: 9223372036854775807 is out of range"),
        (["--layer", "0", "--head", "0", "--position", "10"], "option --position: 10 is out of range"),
        (["--layer", "0", "--head", "0", "--position", "-5"], "option --position: -5 is out of range"),
        (["--layer", "0", "--head", "0", "--position", "1.0"], "option --position expects an integer"),
        (["--layer", "0", "--head", "0", "--position", "1e300"], "option --position expects an integer"),
        (["--layer", "0", "--head", "0", "--drop-rows", "9"], "option --drop-rows: 9 is out of range"),
        (["--layer", "0", "--head", "0", "--position", "0", "--drop-rows", "0"], "option --drop-rows: 0 is out of range"),
        (["--layer", "0", "--head", "0", "--drop-rows", "99999999999999999999"], "option --drop-rows: '99999999999999999999' is too large for a row"),
        (["--layer", "0", "--head", "0", "--drop-rows", "1,,2"], "option --drop-rows: row #2 is empty"),
        (["--layer", "0", "--head", "0", "--drop-rows", "-1"], "option --drop-rows: '-1' is not a row"),
        (["--layer", "0", "--head", "0", "--drop-rows", "2.5"], "option --drop-rows: '2.5' is not a row"),
        (["--layer", "0", "--head", "0", "--zero-k-channels", "16"], "option --zero-k-channels: 16 is out of range"),
        (["--layer", "0", "--head", "0", "--zero-v-channels", "100000"], "option --zero-v-channels: 100000 is out of range"),
        (["--layer", "0", "--head", "0", "--zero-rows", "3"], "--zero-rows says which rows"),
        (["--layer", "0", "--head", "0", "--zero-rows", "9", "--zero-k-channels", "1"], "option --zero-rows: 9 is out of range"),
        (["--head", "0"], "missing required option --layer"),
        (["--layer", "0", "--head", "0", "--layers", "1"], "unknown option --layers"),
    ]
    return [Case("explain_%02d" % i, "explain-parameters", base + extra, expect, model="llama-tiny")
            for i, (extra, expect) in enumerate(sets)]


def compress_cases():
    base = ["compress", "--model", "{model}", "--prompt-ids", "5,6,7,8,9,10,11,12", "--continuation-ids", "13,14,15"]
    sets = [
        (["--policy", "h2o", "--budget", "nan"], "option --budget expects a finite number, got 'nan'"),
        (["--policy", "h2o", "--budget", "inf"], "option --budget expects a finite number"),
        (["--policy", "h2o", "--budget", "1e400"], "option --budget expects a finite number"),
        (["--policy", "h2o", "--budget", " 0.5"], "option --budget expects a finite number"),
        (["--policy", "h2o", "--budget", "0.5x"], "option --budget expects a finite number"),
        (["--policy", "h2o", "--budget", "-0.5"], "budget"),
        (["--policy", "h2o", "--budget", "1.5"], "budget"),
        (["--policy", "h2o", "--budget", "0"], "budget"),
        (["--policy", "h2o", "--budget-rows", "0"], "--budget-rows must be >= 1"),
        (["--policy", "h2o", "--budget-rows", "1.5"], "option --budget-rows expects an integer"),
        (["--policy", "h2o", "--budget-rows", "99999999999999999999"], "option --budget-rows: '99999999999999999999' does not fit"),
        (["--policy", "streaming", "--sinks", "-1"], "sinks"),
        (["--policy", "streaming", "--sinks", "1e9"], "option --sinks expects an integer"),
        (["--policy", "snapkv", "--kernel", "0"], "kernel"),
        (["--policy", "snapkv", "--kernel", "-3"], "kernel"),
        (["--policy", "h2o", "--window", "-2"], "window"),
        (["--policy", "random", "--seed", "-1"], "--seed must be >= 0"),
        (["--policy", "h2o", "--demote", "3"], "demote"),
        (["--policy", "h2o", "--demote", "0"], "--demote must be 8 or 4"),
        (["--policy", "h2o", "--demote", "8.0"], "option --demote expects an integer"),
        (["--policy", "bogus"], "bogus"),
        (["--policy", "h2o", "--sinks", "4"], "--sinks is for --policy streaming"),
        (["--budget", "0.5"], "need --policy"),
        (["--element", "per-token", "--k-sparsity", "nan"], "option --k-sparsity expects a finite number"),
        (["--element", "per-token", "--k-sparsity", "1.5"], "sparsity"),
        (["--element", "per-token", "--v-sparsity", "-0.1"], "sparsity"),
        (["--element", "per-token", "--dense-window", "-1"], "dense"),
        (["--element", "diagonal"], "diagonal"),
        (["--policy", "h2o", "--max-new", "-1"], "max-new"),
        (["--policy", "h2o", "--max-new", "1e9"], "option --max-new expects an integer"),
        (["--policy", "h2o", "--gamma", "0"], "gamma"),
        (["--policy", "h2o", "--gamma", "2.5"], "option --gamma expects an integer"),
        (["--policy", "h2o", "--continuation-ids", "1,2"], "option --continuation-ids is given twice"),
        (["--policy", "h2o", "--policy", "snapkv"], "option --policy is given twice"),
        (["--policy", "h2o", "--json", "--json"], "option --json is given twice"),
        (["--policy", "h2o", "--max-new", "99999999999"], "--max-new is for steps without a continuation"),
    ]
    return [Case("compress_%02d" % i, "compress-parameters", base + extra, expect, model="llama-tiny")
            for i, (extra, expect) in enumerate(sets)]


def all_cases():
    return (config_cases() + duplicate_key_cases() + make_model_cases() + text_file_cases() + explain_cases() +
            compress_cases())


# --- writing and replaying ---------------------------------------------------


def materialise(case, root):
    """Writes the case's inputs under root/case.name; returns (model dir, scratch dir)."""
    scratch = root / case.name
    scratch.mkdir(parents=True, exist_ok=True)
    model_dir = None
    if case.model:
        # The fixture's files as symlinks, the case's own files written over them.
        model_dir = scratch / "model"
        model_dir.mkdir(exist_ok=True)
        for source in (FIXTURES / case.model).iterdir():
            target = model_dir / source.name
            if not target.exists() and not target.is_symlink():
                target.symlink_to(source)
        for name, content in case.files.items():
            target = model_dir / name
            if target.is_symlink() or target.exists():
                target.unlink()
            if content is not None:
                target.write_text(content)
    for name, content in case.scratch.items():
        if isinstance(content, tuple) and content[0] == "sparse":
            with open(scratch / name, "wb") as out:
                out.truncate(content[1])  # a hole: no disk used
        else:
            (scratch / name).write_text(content)
    return model_dir, scratch


def first_error(err):
    for line in err.splitlines():
        if "error:" in line:
            return line.strip()
    return err.strip().splitlines()[0] if err.strip() else ""


def check(case, code, err):
    problems = []
    if code != 2:
        problems.append("exit status %s, expected 2" % code)
    if "internal error" in err:
        problems.append('printed "internal error"')
    errors = "\n".join(line for line in err.splitlines() if "error" in line)
    for expected in case.expect:
        if expected not in errors:
            problems.append("no %r in the error" % expected)
    return problems


def run_one(cli, case, root):
    """Forks the CLI and waits for it with wait4, for its own CPU time and peak RSS."""
    model_dir, scratch = materialise(case, root)
    argv = [a.replace("{model}", str(model_dir)).replace("{dir}", str(scratch)) for a in case.argv]
    done = run_measured([cli] + argv, scratch, dict(os.environ, OMP_NUM_THREADS="1"), WALL_TIMEOUT_S)
    if done is None:
        return ["no answer within %d s" % WALL_TIMEOUT_S], "", 0.0, 0.0
    status, _, err_bytes, cpu, peak_mb = done
    err = err_bytes.decode(errors="replace")
    problems = check(case, status, err)
    if cpu > CPU_BUDGET_S:
        problems.append("%.1f s of CPU, over the %.0f s budget" % (cpu, CPU_BUDGET_S))
    if peak_mb > PEAK_BUDGET_MB:
        problems.append("peak RSS %.0f MB, over the %d MB budget" % (peak_mb, PEAK_BUDGET_MB))
    return problems, first_error(err), cpu, peak_mb


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.environ.get("KVSCOPE_CLI"), help="the kvscope-cli binary")
    parser.add_argument("--write", help="keep the generated inputs in this directory")
    parser.add_argument("-k", dest="only", help="run only cases whose name or class contains this")
    parser.add_argument("-v", dest="verbose", action="store_true", help="print every case's error line")
    args = parser.parse_args()
    if not args.cli:
        parser.error("give --cli or $KVSCOPE_CLI")
    cases = [c for c in all_cases() if not args.only or args.only in c.name or args.only in c.cls]
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "case names repeat"
    root = Path(args.write) if args.write else Path(tempfile.mkdtemp(prefix="kvscope-hostile-"))
    failed = 0
    per_class = {}
    worst_cpu = worst_peak = 0.0
    try:
        for case in cases:
            problems, line, cpu, peak = run_one(args.cli, case, root)
            per_class.setdefault(case.cls, [0, 0])[0] += 1
            worst_cpu, worst_peak = max(worst_cpu, cpu), max(worst_peak, peak)
            if problems:
                failed += 1
                per_class[case.cls][1] += 1
                print("FAIL %s (%s): %s\n     %s" % (case.name, case.cls, "; ".join(problems), line))
            elif args.verbose:
                print("ok   %-40s %5.2f s %5.0f MB  %s" % (case.name, cpu, peak, line[:160]))
    finally:
        if not args.write:
            shutil.rmtree(root, ignore_errors=True)
    for cls, (count, bad) in sorted(per_class.items()):
        print("%-22s %3d cases, %d failed" % (cls, count, bad))
    print("%d cases, %d failed; worst CPU %.2f s, worst peak RSS %.0f MB" % (len(cases), failed, worst_cpu, worst_peak))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
