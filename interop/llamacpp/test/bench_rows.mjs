// CTest llamacpp_bench_rows: bench.mjs, run short on the fixture pair, labels
// each figure with the path that produced it: kvscope's row, and per llama.cpp
// GGUF a row through node-llama-cpp's generator (sequence.evaluate, the path
// its users call) and a second row through one controlledEvaluate per token;
// both llama.cpp paths decode the same greedy tokens. Checks the report, not
// the speeds (a short run on a shared machine times nothing worth checking).
//
// node test/bench_rows.mjs --cli KVSCOPE_CLI --target DIR --drafter DIR
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {parseArgs, requireNodeLlamaCpp} from "../kvscope.mjs";

await requireNodeLlamaCpp();
const args = parseArgs(process.argv.slice(2));
const here = path.dirname(new URL(import.meta.url).pathname);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kvscope-llamacpp-bench-rows-"));
let ok = true;
const check = (cond, what) => {
  console.log(`${cond ? "ok  " : "FAIL"} ${what}`);
  ok &&= cond;
};

try {
  const json = path.join(tmp, "bench.json");
  // Two trials: each llama.cpp decode path runs first in one of them.
  const r = spawnSync(process.execPath, [path.join(here, "../bench.mjs"), "--cli", args.cli, "--target", args.target,
    "--drafter", args.drafter, "--trials", "2", "--new-tokens", "12", "--prefill", "24", "--json", json],
  {encoding: "utf8", maxBuffer: 64 << 20});
  check(r.status === 0, `bench.mjs exits 0 (got ${r.status}${r.status ? `: ${r.stderr}` : ""})`);
  const report = JSON.parse(fs.readFileSync(json, "utf8"));
  const rows = report.rows ?? [];
  const positive = (x) => typeof x === "number" && x > 0;
  const kv = rows.filter((row) => row.engine.startsWith("kvscope"));
  check(kv.length === 1 && positive(kv[0].decode) && positive(kv[0].prefill) && positive(kv[0].speculative),
    "one kvscope row with decode, prefill and speculative figures");
  for (const engine of ["llama.cpp F32", "llama.cpp F16"]) {
    const mine = rows.filter((row) => row.engine === engine);
    const generator = mine.find((row) => row.path.includes("sequence.evaluate"));
    const perCall = mine.find((row) => row.path.includes("controlledEvaluate"));
    check(mine.length === 2, `${engine}: two rows (${mine.map((row) => row.path).join(" / ")})`);
    check(generator != null && positive(generator.decode) && positive(generator.prefill) && positive(generator.speculative) &&
      positive(generator.predictor), `${engine}: the generator's row carries decode ${generator?.decode?.toFixed(1)}, prefill and speculative`);
    check(perCall != null && positive(perCall.decode) && perCall.prefill == null,
      `${engine}: the per-call row carries its decode ${perCall?.decode?.toFixed(1)} and nothing else`);
    check(report.trials_raw?.[engine]?.decode?.length === 2 && report.trials_raw?.[engine]?.decode_per_call?.length === 2,
      `${engine}: both paths timed in each of the 2 trials`);
    // The printed table names the same rows.
    check(r.stdout.includes(`| ${engine} | ${generator?.path} |`) && r.stdout.includes(`| ${engine} | ${perCall?.path} |`),
      `${engine}: the printed table labels both rows with their path`);
  }
  check(report.decode_paths_agree === true, "llama.cpp's generator and per-call paths decode the same greedy tokens");
} finally {
  fs.rmSync(tmp, {recursive: true, force: true});
}
console.log(ok ? "all checks passed" : "checks failed");
process.exit(ok ? 0 : 1);
