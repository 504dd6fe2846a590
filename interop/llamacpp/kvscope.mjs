// Runs kvscope-cli and reads its JSON result (the last line of stdout).
import {execFileSync, spawnSync} from "node:child_process";

export function kvscope(cli, args) {
  let out;
  try {
    out = execFileSync(cli, args, {encoding: "utf8", maxBuffer: 256 << 20, env: {...process.env, OMP_NUM_THREADS: "1"}});
  } catch (e) {
    throw new Error(`kvscope-cli ${args.join(" ")} failed: ${e.stderr || e.message}`);
  }
  const lines = out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

// The exit status and JSON result of a command that may exit non-zero (check: 1 on a breach).
export function kvscopeStatus(cli, args) {
  const r = spawnSync(cli, args, {encoding: "utf8", maxBuffer: 256 << 20, env: {...process.env, OMP_NUM_THREADS: "1"}});
  const lines = (r.stdout || "").trim().split("\n");
  let result = null;
  try {
    result = JSON.parse(lines[lines.length - 1]);
  } catch {
    result = null;
  }
  return {status: r.status, result, stderr: r.stderr};
}

// Exit code CTest reads as "skipped" (SKIP_RETURN_CODE).
export const SKIPPED = 77;

// node-llama-cpp is installed by cmake/setup.sh; without it the tests that
// need it report skipped, never passed.
export async function requireNodeLlamaCpp() {
  try {
    await import("node-llama-cpp");
  } catch (e) {
    console.log(`skipped: node-llama-cpp is not installed in interop/llamacpp (${e.code || e.message}); cmake/setup.sh installs it`);
    process.exit(SKIPPED);
  }
}

export function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; ++i) {
    if (!argv[i].startsWith("--")) throw new Error(`unexpected argument ${argv[i]}`);
    const key = argv[i].slice(2);
    if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) args[key] = argv[++i];
    else args[key] = true;
  }
  return args;
}
