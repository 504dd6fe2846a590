// Shared helpers: llama.cpp (through node-llama-cpp) set up the way kvscope's
// comparisons need it: CPU only, F32 KV cache, flash attention off, one thread
// (at 2 threads node-llama-cpp's decode of the tiny models stalls in
// llama.cpp's thread barrier).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

let llamaPromise = null;
let llamaThreads = 1;

// The thread count llama.cpp is started with; call before the first llama().
// Models large enough for their forward to dwarf a thread barrier (the 0.5 B
// shape) run at 2 like kvscope; the tiny bundled pair stays at 1.
export function setLlamaThreads(threads) {
  if (llamaPromise) throw new Error("setLlamaThreads: llama.cpp is already started");
  if (!Number.isInteger(threads) || threads < 1 || threads > 256) throw new Error(`threads must be 1-256, got ${threads}`);
  llamaThreads = threads;
}

export function llama() {
  llamaPromise ??= getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: llamaThreads});
  return llamaPromise;
}

export async function loadModel(path) {
  return (await llama()).loadModel({modelPath: path, gpuLayers: 0, useMmap: false});
}

// cache: "f32" (the comparisons) or "f16" (llama.cpp's default).
export async function makeContext(model, {contextSize = 256, cache = "f32", sequences = 1, threads = llamaThreads} = {}) {
  const kv = cache === "f32" ? "F32" : "F16";
  return model.createContext({
    contextSize, sequences, threads, batchSize: contextSize,
    flashAttention: false,
    experimentalKvCacheKeyType: kv,
    experimentalKvCacheValueType: kv,
    swaFullCache: false,
  });
}

// log-softmax of llama.cpp's logits for the token after `ids` (a fresh sequence).
export async function nextLogProbs(sequence, ids) {
  const res = await sequence.controlledEvaluate(ids.map((t, i) =>
    i === ids.length - 1 ? [t, {generateNext: {probabilities: true, options: {temperature: 0}}}] : t));
  const probs = res[ids.length - 1].next.probabilities;
  return probs;
}

export function logSoftmax(logits) {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  return logits.map((x) => x - lse);
}
