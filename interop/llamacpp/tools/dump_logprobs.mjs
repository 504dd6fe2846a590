// Writes llama.cpp's log-probabilities of the next token after each id
// sequence of a tests/fixtures/logits file (F32 cache, flash attention off,
// 1 thread) as JSON, for gelu_f16_emulation.py.
// node tools/dump_logprobs.mjs MODEL.gguf tests/fixtures/logits/NAME.json OUT.json
import fs from "node:fs";
import {loadModel, makeContext} from "../llama.mjs";
const [gguf, casesFile, out] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesFile, "utf8")).cases;
const model = await loadModel(gguf);
const ctx = await makeContext(model);
const seq = ctx.getSequence();
const res = [];
for (const c of cases) {
  await seq.clearHistory();
  const r = await seq.controlledEvaluate(c.ids.map((t, i) => i === c.ids.length - 1 ? [t, {generateNext: {probabilities: true, options: {temperature: 0}}}] : t));
  const lp = new Array(r[c.ids.length - 1].next.probabilities.size).fill(null);
  for (const [t, p] of r[c.ids.length - 1].next.probabilities) lp[t] = Math.log(p);
  res.push(lp);
}
fs.writeFileSync(out, JSON.stringify(res));
