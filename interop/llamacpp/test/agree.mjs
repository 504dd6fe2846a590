// CTest llamacpp_agree_<model>: a checkpoint exported with kvscope-cli
// export-gguf (F32) loads in llama.cpp (node-llama-cpp, CPU, F32 cache,
// flash attention off, 1 thread) and
//   * gives the log-probabilities kvscope-cli logits gives, within 1e-4, for
//     the last position of each id sequence, and the same argmax at every
//     position (where llama.cpp's top two are more than 1e-3 apart);
//   * decodes the same 32 greedy tokens as kvscope-cli generate;
//   * tokenizes strings to kvscope's ids (encodings.json fixtures: the ids
//     kvscope's tokenizer tests hold it to; else kvscope-cli tokenize).
//
// node test/agree.mjs --cli KVSCOPE_CLI --model DIR [--cases FILE] [--encodings FILE]
//   [--tokenize-with-cli] [--min-length N] [--short-differs] [--no-window]
//   [--tolerance T --because TEXT]
// --tolerance: a larger bound on |d log p| for a stated reason (GPT-2 and
// Gemma 2: llama.cpp's CPU GELU rounds its input to float16 and reads a
// float16 table, ggml-cpu/vec.h GGML_GELU_FP16).
// --no-window: runs on a copy of the model with sliding_window null (a
// Mistral without a window exports as llama.cpp's llama).
// --min-length N: compare sequences of at least N ids only; with --short-differs
// the shorter ones must differ (Phi-3 longrope: llama.cpp picks the factor set
// by its context size, padded to 256 cells, Hugging Face and kvscope by the
// forward call's length).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {kvscope, parseArgs, requireNodeLlamaCpp} from "../kvscope.mjs";

await requireNodeLlamaCpp();
const {loadModel, makeContext, logSoftmax} = await import("../llama.mjs");

const args = parseArgs(process.argv.slice(2));
const cli = args.cli;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kvscope-llamacpp-"));
const tolerance = Number(args.tolerance ?? 1e-4);
if (args.tolerance) console.log(`tolerance ${tolerance} on |d log p|: ${args.because}`);
const modelDir = args["no-window"] ? withoutWindow(args.model) : args.model;

function withoutWindow(dir) {
  const copy = path.join(tmp, "model");
  fs.cpSync(dir, copy, {recursive: true});
  const config = JSON.parse(fs.readFileSync(path.join(copy, "config.json"), "utf8"));
  config.sliding_window = null;
  fs.writeFileSync(path.join(copy, "config.json"), JSON.stringify(config, null, 2));
  return copy;
}
const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
};

function idCases() {
  if (args.cases) return JSON.parse(fs.readFileSync(args.cases, "utf8")).cases.map((c) => c.ids);
  // the bundled models: three sequences of their own tokens
  const text = "Once upon a time, there was a little girl who lived in a village near the forest. Whenever she went out, she wore a red riding cloak.";
  const ids = kvscope(cli, ["tokenize", "--model", modelDir, "--text", text, "--json"]).ids;
  return [ids.slice(0, 5), ids.slice(0, 17), ids];
}

// llama.cpp's log-probabilities after every position of `ids`, in a fresh sequence.
async function llamaLogProbs(sequence, ids, vocab) {
  await sequence.clearHistory();
  const res = await sequence.controlledEvaluate(ids.map((t) => [t, {generateNext: {probabilities: true, options: {temperature: 0}}}]));
  return res.map((r) => {
    const lp = new Float64Array(vocab).fill(-Infinity);
    for (const [token, p] of r.next.probabilities) lp[token] = Math.log(p);
    return lp;
  });
}

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; ++i) if (a[i] > a[best]) best = i;
  return best;
}

function top2Gap(a) {
  const s = [...a].sort((x, y) => y - x);
  return s[0] - s[1];
}

async function compareLogits(model, sequence) {
  const minLength = Number(args["min-length"] ?? 0);
  let worst = 0;
  for (const ids of idCases()) {
    const ref = kvscope(cli, ["logits", "--model", modelDir, "--ids", ids.join(","), "--mode", "nocache", "--json"]);
    const refLp = logSoftmax(ref.last_logits);
    const lps = await llamaLogProbs(sequence, ids, refLp.length);
    const last = lps[lps.length - 1];
    let diff = 0;
    for (let t = 0; t < refLp.length; ++t) if (Number.isFinite(last[t])) diff = Math.max(diff, Math.abs(last[t] - refLp[t]));
    const underflow = last.filter((x) => !Number.isFinite(x)).length;
    if (ids.length < minLength) {
      if (args["short-differs"])
        check(diff > 1e-3, `${ids.length} ids (short of ${minLength}): llama.cpp's long rope factors differ from kvscope's short ones, max |d log p| ${diff.toExponential(2)}`);
      continue;
    }
    worst = Math.max(worst, diff);
    check(diff <= tolerance && underflow === 0, `${ids.length} ids: max |d log p| at the last position ${diff.toExponential(2)} (<= ${tolerance})`);
    let agree = 0, compared = 0;
    lps.forEach((lp, i) => {
      if (top2Gap(lp) < 1e-3) return;
      ++compared;
      if (argmax(lp) === ref.argmax[i]) ++agree;
    });
    check(agree === compared && compared > 0, `${ids.length} ids: argmax agrees at ${agree} of ${compared} positions`);
  }
  console.log(`max |d log p| over the compared sequences: ${worst.toExponential(3)}`);
}

async function compareGreedy(model, sequence) {
  const cases = idCases();
  const minLength = Number(args["min-length"] ?? 0);
  const prompt = cases.find((ids) => ids.length >= Math.max(minLength, 5)).slice(0, Math.max(minLength, 5));
  const ref = kvscope(cli, ["generate", "--model", modelDir, "--prompt-ids", prompt.join(","), "--max-new", "32",
    "--greedy", "--ignore-eos", "--json"]).ids;
  await sequence.clearHistory();
  const got = [];
  for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
    got.push(token);
    if (got.length === 32) break;
  }
  const first = got.findIndex((t, i) => t !== ref[i]);
  check(first === -1 && got.length === 32, `32 greedy tokens after ${prompt.length} prompt ids: ` +
    (first === -1 ? "identical" : `first difference at token ${first}: ${got[first]} vs kvscope ${ref[first]}`));
}

function tokenizeCases() {
  if (args.encodings) {
    return JSON.parse(fs.readFileSync(args.encodings, "utf8")).cases.map((c) => ({text: c.text, ids: c.ids_no_special, name: c.name}));
  }
  if (!args["tokenize-with-cli"]) return [];
  return ["Once upon a time", "The year 2024: 3.14159, 1,234,567 and 42!", "  two spaces\nand a newline", "café naïve Straße"]
    .map((text) => ({text, name: JSON.stringify(text), ids: kvscope(cli, ["tokenize", "--model", modelDir, "--text", text, "--json"]).ids}));
}

function compareTokenizer(model) {
  const cases = tokenizeCases();
  if (cases.length === 0) return;
  let same = 0;
  for (const c of cases) {
    let ids = [...model.tokenize(c.text, true)];
    // kvscope-cli tokenize adds what the post-processor adds (BOS for these models)
    if (c.ids.length > 0 && c.ids[0] === model.tokens.bos && ids[0] !== model.tokens.bos && model.tokens.shouldPrependBosToken)
      ids = [model.tokens.bos, ...ids];
    if (JSON.stringify(ids) === JSON.stringify(c.ids)) ++same;
    else console.log(`  ${c.name}: llama.cpp ${JSON.stringify(ids)} vs kvscope ${JSON.stringify(c.ids)}`);
  }
  check(same === cases.length, `tokenizer: ${same} of ${cases.length} strings give kvscope's ids`);
}

try {
  const gguf = path.join(tmp, "model.gguf");
  const exported = kvscope(cli, ["export-gguf", "--model", modelDir, "--out", gguf, "--dtype", "f32", "--json"]);
  console.log(`exported ${modelDir}: ${exported.architecture}, ${exported.tensors} tensors, tokenizer ${exported.tokenizer}`);
  const model = await loadModel(gguf);
  const context = await makeContext(model, {contextSize: 256, cache: "f32"});
  const sequence = context.getSequence();
  await compareLogits(model, sequence);
  await compareGreedy(model, sequence);
  compareTokenizer(model);
  await context.dispose();
  await model.dispose();
} finally {
  fs.rmSync(tmp, {recursive: true, force: true});
}
console.log(`${failures.length === 0 ? "all checks passed" : `${failures.length} checks failed`}`);
process.exit(failures.length === 0 ? 0 : 1);
