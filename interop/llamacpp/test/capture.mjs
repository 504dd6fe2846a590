// CTest llamacpp_capture_*: llama.cpp runs a greedy speculative loop
// (spec_loop.mjs) over the exported fixture pair under the recorder;
// kvscope-cli import-llamacpp turns the log into a capture and kvscope-cli
// check reads it. A correct loop checks clean (exit 0, F32 and F16 caches);
// each broken loop is named with the role, call and kind the loop itself
// says it broke (never taken from the checker).
//
// node test/capture.mjs --cli KVSCOPE_CLI --target DIR --drafter DIR --loop correct|keep_one_rejected|reset|skip_position|repeat_position
//   [--cache f32|f16] [--new-tokens N] [--gamma G]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {kvscope, kvscopeStatus, parseArgs, requireNodeLlamaCpp} from "../kvscope.mjs";

await requireNodeLlamaCpp();
const {loadModel, makeContext} = await import("../llama.mjs");
const {Recorder} = await import("../recorder.mjs");
const {speculativeGreedy} = await import("../spec_loop.mjs");

const args = parseArgs(process.argv.slice(2));
const cli = args.cli;
const loop = args.loop ?? "correct";
const bug = loop === "correct" ? null : loop;
const expectedKind = {keep_one_rejected: "crop", reset: "reset", skip_position: "skipped_position", repeat_position: "refed_prefix"}[loop];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kvscope-llamacpp-capture-"));
let ok = true;
const check = (cond, what) => {
  console.log(`${cond ? "ok  " : "FAIL"} ${what}`);
  ok &&= cond;
};

try {
  const files = {};
  for (const role of ["target", "drafter"]) {
    files[role] = path.join(tmp, `${role}.gguf`);
    kvscope(cli, ["export-gguf", "--model", args[role], "--out", files[role], "--json"]);
  }
  const models = {target: await loadModel(files.target), drafter: await loadModel(files.drafter)};
  const contexts = {};
  for (const role of ["target", "drafter"]) contexts[role] = await makeContext(models[role], {cache: args.cache ?? "f32"});
  const rec = new Recorder(path.join(tmp, "run"));
  const target = rec.watch(contexts.target.getSequence(), "target", {gguf: files.target, modelDir: args.target});
  const drafter = rec.watch(contexts.drafter.getSequence(), "drafter", {gguf: files.drafter, modelDir: args.drafter});
  const prompt = kvscope(cli, ["tokenize", "--model", args.target, "--text", "Once upon a time", "--json"]).ids;
  const run = await speculativeGreedy({target, drafter, prompt, newTokens: Number(args["new-tokens"] ?? 40), gamma: Number(args.gamma ?? 4), bug});
  rec.commit(run.ids);
  const log = await rec.close();
  console.log(`${loop}: ${run.rounds} rounds, ${run.accepted} drafts accepted, ${run.targetCalls} target and ${run.drafterCalls} drafter calls` +
    (bug ? `, the bug first seen by ${run.firstBuggy?.role} call ${run.firstBuggy?.call}` : ""));
  if (bug) check(run.firstBuggy != null, "the run reached the round where the bug acts");

  const capture = path.join(tmp, "run.kvcapture");
  const imported = kvscope(cli, ["import-llamacpp", log, "--out", capture, "--json"]);
  check(imported.calls.target === run.targetCalls && imported.calls.drafter === run.drafterCalls,
    `imported ${imported.calls.target} target and ${imported.calls.drafter} drafter calls, ${imported.erases} erases, ${imported.cache_type} cache`);
  const {status, result, stderr} = kvscopeStatus(cli, ["check", capture, "--json"]);
  if (result == null) console.log(`check printed no result (exit ${status}): ${stderr}`);
  if (!bug) {
    check(status === 0 && result?.ok === true, `correct loop checks clean (values of ${result?.rows_value_checked} rows within ${result?.max_value_error}, ${result?.logit_rows_checked} logit rows)`);
  } else {
    const rc = result?.root_cause;
    console.log(`check: ${rc?.what}`);
    check(status === 1 && rc?.role === run.firstBuggy?.role && rc?.call === run.firstBuggy?.call && rc?.kind === expectedKind,
      `root cause ${rc?.role} call ${rc?.call} ${rc?.operation} ${rc?.kind}; the loop broke ${run.firstBuggy?.role} call ${run.firstBuggy?.call} (${expectedKind})`);
  }
  for (const role of ["target", "drafter"]) {
    await contexts[role].dispose();
    await models[role].dispose();
  }
} finally {
  fs.rmSync(tmp, {recursive: true, force: true});
}
console.log(ok ? "all checks passed" : "checks failed");
process.exit(ok ? 0 : 1);
