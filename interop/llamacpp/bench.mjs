// llama.cpp beside kvscope on the same model pair, in one run, trials
// interleaved (kvscope, llama.cpp F32, llama.cpp F16, kvscope, ...), medians
// reported. One thread each by default: node-llama-cpp's decode of the tiny
// bundled models stalls in llama.cpp's thread barrier at 2 threads (10-15x
// slower than its C API); a real-size model (the 0.5 B shape) runs at 2.
//
// node bench.mjs --cli build/app/kvscope-cli [--target DIR --drafter DIR] [--trials 3]
//   [--new-tokens 64] [--prefill 500] [--gamma 4] [--threads 1]
//   [--prompt-ids 1,2,3 (a model without a tokenizer)] [--parts decode,prefill,speculative]
//   [--weights stored|fp32 (kvscope's)] [--json FILE]
//
// One untimed warm-up round of every measured path precedes the trials.
// Measured per engine:
//   decode      greedy tokens/s after the prompt, one token per forward (cache on).
//               llama.cpp: node-llama-cpp's generator, `LlamaContextSequence.evaluate`
//               (the path its users call; the completion and chat APIs sit on it);
//               kvscope: its autoregressive decode (`kvscope-cli bench`)
//   decode per call  llama.cpp only, a second row: one `controlledEvaluate` per
//               token (what spec_loop.mjs and the recorder call), which pays a
//               round trip from JavaScript for every token
//   prefill     ms for one forward of `prefill` prompt tokens
//   speculative greedy tokens/s with the drafter, gamma 4 (kvscope: its session;
//               llama.cpp: spec_loop.mjs, the same bookkeeping, and node-llama-cpp's
//               own DraftSequenceTokenPredictor)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {performance} from "node:perf_hooks";
import {kvscope, parseArgs, requireNodeLlamaCpp} from "./kvscope.mjs";

await requireNodeLlamaCpp();
const {loadModel, makeContext, setLlamaThreads} = await import("./llama.mjs");
const {speculativeGreedy} = await import("./spec_loop.mjs");
const {DraftSequenceTokenPredictor} = await import("node-llama-cpp");

const args = parseArgs(process.argv.slice(2));
const here = path.dirname(new URL(import.meta.url).pathname);
const cli = args.cli;
const targetDir = args.target ?? path.join(here, "../../resources/models/target");
const drafterDir = args.drafter ?? path.join(here, "../../resources/models/drafter");
const trials = Number(args.trials ?? 3);
const newTokens = Number(args["new-tokens"] ?? 64);
const prefillRows = Number(args.prefill ?? 500);
const gamma = Number(args.gamma ?? 4);
const threads = Number(args.threads ?? 1);
const weights = args.weights ?? "stored";
const parts = new Set(String(args.parts ?? "decode,prefill,speculative").split(","));
for (const part of parts) {
  if (!["decode", "prefill", "speculative"].includes(part)) throw new Error(`--parts: unknown part ${part}`);
}
setLlamaThreads(threads);
const promptText = "And the LORD spake unto Moses, saying,";  // kvscope-cli bench's default prompt

const median = (xs) => {
  xs = xs.filter((x) => x != null);
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kvscope-llamacpp-bench-"));
const prompt = args["prompt-ids"]
  ? String(args["prompt-ids"]).split(",").map(Number)
  : kvscope(cli, ["tokenize", "--model", targetDir, "--text", promptText, "--json"]).ids;
// a 500-token prompt: the target greedily continues its own prompt (real text for the model);
// made only when prefill is timed (500 greedy tokens of a real-size model take minutes)
const long = !parts.has("prefill") ? [] : [...prompt, ...kvscope(cli, ["generate", "--model", targetDir, "--prompt-ids",
  prompt.join(","), "--max-new", String(prefillRows), "--greedy", "--ignore-eos", "--json"]).ids].slice(0, prefillRows);

async function llamaEngine(dtype) {
  const files = {};
  for (const [role, dir] of [["target", targetDir], ["drafter", drafterDir]]) {
    files[role] = path.join(tmp, `${role}-${dtype}.gguf`);
    kvscope(cli, ["export-gguf", "--model", dir, "--out", files[role], "--dtype", dtype, "--json"]);
  }
  const target = await loadModel(files.target);
  const drafter = await loadModel(files.drafter);
  return {name: `llama.cpp ${dtype.toUpperCase()}`, dtype, target, drafter};
}

const greedy = (t) => [t, {generateNext: {token: true, options: {temperature: 0}}}];

// The ids decoded and their tokens/s, one forward per token after the prompt
// (all but its last token fed first, untimed, in both paths).
async function decodeRun(engine, perCall) {
  const ctx = await makeContext(engine.target, {contextSize: 1024, cache: engine.dtype});
  const seq = ctx.getSequence();
  await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
  let t = prompt[prompt.length - 1];
  const ids = [];
  const start = performance.now();
  if (perCall) {
    for (let i = 0; i < newTokens; ++i) ids.push(t = (await seq.controlledEvaluate([greedy(t)]))[0].next.token);
  } else {
    // Each step of the generator evaluates the token it yielded before and
    // samples the next; leaving the loop ends it without another forward.
    for await (const next of seq.evaluate([t], {temperature: 0})) {
      ids.push(next);
      if (ids.length === newTokens) break;
    }
  }
  const ms = performance.now() - start;
  await ctx.dispose();
  return {tps: newTokens / (ms / 1000), ids};
}

async function prefillRun(engine) {
  const ctx = await makeContext(engine.target, {contextSize: 1024, cache: engine.dtype});
  const seq = ctx.getSequence();
  const start = performance.now();
  await seq.controlledEvaluate(long.map((t, i) => (i === long.length - 1 ? greedy(t) : t)));
  const ms = performance.now() - start;
  await ctx.dispose();
  return ms;
}

async function speculativeRun(engine) {
  const tctx = await makeContext(engine.target, {contextSize: 1024, cache: engine.dtype});
  const dctx = await makeContext(engine.drafter, {contextSize: 1024, cache: engine.dtype});
  const start = performance.now();
  const run = await speculativeGreedy({target: tctx.getSequence(), drafter: dctx.getSequence(), prompt, newTokens, gamma});
  const ms = performance.now() - start;
  await tctx.dispose();
  await dctx.dispose();
  return {tps: newTokens / (ms / 1000), accepted: run.accepted / (run.rounds * gamma)};
}

async function predictorRun(engine) {
  const dctx = await makeContext(engine.drafter, {contextSize: 1024, cache: engine.dtype});
  const tctx = await makeContext(engine.target, {contextSize: 1024, cache: engine.dtype});
  const predictor = new DraftSequenceTokenPredictor(dctx.getSequence(), {minTokens: gamma, maxTokens: gamma, evaluateOptions: {temperature: 0}});
  const seq = tctx.getSequence({tokenPredictor: predictor});
  const start = performance.now();
  let n = 0;
  for await (const token of seq.evaluate(prompt, {temperature: 0})) {
    void token;
    if (++n === newTokens) break;
  }
  const ms = performance.now() - start;
  await tctx.dispose();
  await dctx.dispose();
  return newTokens / (ms / 1000);
}

function kvscopeTrial() {
  const promptArgs = args["prompt-ids"] ? ["--prompt-ids", prompt.join(",")] : ["--prompt", promptText];
  const r = kvscope(cli, ["bench", "--target", targetDir, "--drafter", parts.has("speculative") ? drafterDir : "none",
    "--threads", String(threads), "--weights", weights, "--trials", "1", "--warmup", "1", "--budget-ms", "60000",
    "--new-tokens", String(newTokens), "--contexts", "64", "--gammas", String(gamma), "--prefill-rows", String(prefillRows),
    "--bound-context", "64", "--uncached-max-context", "0", ...promptArgs, "--json"]);
  const spec = (r.speculative ?? []).find((s) => s.gamma === gamma);
  return {
    decode: r.autoregressive.cache_on.tokens_per_second,
    prefill: parts.has("prefill") ? r.forward_vs_baseline.prefill_forward.median_ms : null,
    speculative: spec ? newTokens / (spec.session_ms.median / 1000) : null,
    accepted: spec ? spec.alpha : null,
  };
}

const engines = [await llamaEngine("f32"), await llamaEngine("f16")];
const results = {kvscope: {decode: [], prefill: [], speculative: [], accepted: []}};
for (const e of engines) results[e.name] = {decode: [], decode_per_call: [], prefill: [], speculative: [], predictor: [], accepted: []};
// Both of llama.cpp's decode paths must produce the same greedy tokens: the
// race compares speeds of the same work.
const decodedIds = {};
// One untimed round of each measured llama.cpp path first, as kvscope's bench
// does (--warmup 1): the first forward pays the weights' page faults and the
// compute buffers' allocation, which no later trial pays.
for (const e of engines) {
  if (parts.has("decode")) {
    await decodeRun(e, false);
    await decodeRun(e, true);
  }
  if (parts.has("prefill")) await prefillRun(e);
  if (parts.has("speculative")) {
    await speculativeRun(e);
    await predictorRun(e);
  }
}
for (let t = 0; t < trials; ++t) {
  const k = kvscopeTrial();
  for (const key of Object.keys(k)) results.kvscope[key].push(k[key]);
  for (const e of engines) {
    const r = results[e.name];
    if (parts.has("decode")) {
      for (const perCall of t % 2 ? [true, false] : [false, true]) {  // each path first in every other trial
        const d = await decodeRun(e, perCall);
        (perCall ? r.decode_per_call : r.decode).push(d.tps);
        (decodedIds[e.name] ??= new Set()).add(d.ids.join(","));
      }
    }
    if (parts.has("prefill")) r.prefill.push(await prefillRun(e));
    if (parts.has("speculative")) {
      const s = await speculativeRun(e);
      r.speculative.push(s.tps);
      r.accepted.push(s.accepted);
      r.predictor.push(await predictorRun(e));
    }
  }
  console.error(`bench: trial ${t + 1} of ${trials} done`);
}

const summary = {};  // per engine, the median of each measure over the trials
for (const [name, r] of Object.entries(results)) {
  summary[name] = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, median(v)]));
}
const f = (x, d = 1) => (x == null ? "-" : x.toFixed(d));
const sameTokens = Object.values(decodedIds).every((ids) => ids.size === 1);
if (!sameTokens) {
  console.error("bench: llama.cpp's two decode paths (or two trials) produced different tokens:",
    JSON.stringify(Object.fromEntries(Object.entries(decodedIds).map(([k, v]) => [k, [...v]]))));
}
// One row per engine and path: llama.cpp's generator is its decode; its
// per-call path is a second, labelled row, and so are its two speculative loops.
const rows = [];
for (const [name, s] of Object.entries(summary)) {
  if (name === "kvscope") {
    rows.push({engine: `kvscope (${weights === "fp32" ? "F32" : "weights as stored"})`, path: "in process (kvscope-cli bench)",
      decode: s.decode, prefill: s.prefill, speculative: s.speculative, predictor: null});
    continue;
  }
  rows.push({engine: name, path: "generator (sequence.evaluate)", decode: s.decode, prefill: s.prefill,
    speculative: s.speculative, predictor: s.predictor});
  if (parts.has("decode")) {
    rows.push({engine: name, path: "one controlledEvaluate per token", decode: s.decode_per_call, prefill: null, speculative: null, predictor: null});
  }
}
console.log(`| engine (${threads} thread${threads > 1 ? "s" : ""}) | path | decode, tokens/s | prefill ${prefillRows} tokens, ms | speculative gamma ${gamma} (llama.cpp: spec_loop.mjs), tokens/s | node-llama-cpp's DraftSequenceTokenPredictor, tokens/s |`);
console.log("|---|---|---|---|---|---|");
for (const r of rows) console.log(`| ${r.engine} | ${r.path} | ${f(r.decode)} | ${f(r.prefill)} | ${f(r.speculative)} | ${f(r.predictor)} |`);
const report = {date: new Date().toISOString(), trials, new_tokens: newTokens, prefill_tokens: long.length, gamma, threads, weights,
  prompt: promptText, load: os.loadavg(), rows, decode_paths_agree: sameTokens, medians: summary, trials_raw: results};
if (args.json) fs.writeFileSync(args.json, JSON.stringify(report, null, 2));
console.log(JSON.stringify(report.medians));
for (const e of engines) {
  await e.target.dispose();
  await e.drafter.dispose();
}
fs.rmSync(tmp, {recursive: true, force: true});
