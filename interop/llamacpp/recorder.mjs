// Records what llama.cpp's caches held during a run driven through
// node-llama-cpp, for `kvscope-cli import-llamacpp` and then `check`.
//
//   const rec = new Recorder("run.d");                       // a directory of its own
//   const target = rec.watch(targetSequence, "target", {gguf, modelDir});
//   const drafter = rec.watch(drafterSequence, "drafter", {gguf, modelDir});
//   ... the loop calls target.controlledEvaluate(...), .evaluateWithoutGeneratingNewTokens(...),
//       .eraseContextTokenRanges(...) exactly as on the sequences ...
//   rec.commit(ids);                                          // the final token ids, prompt included
//   await rec.close();                                        // writes run.d/log.json
//
// Per evaluation it logs the tokens and the positions they went to (the
// sequence's nextTokenIndex onwards), the log-probabilities of every output
// the loop asked for (it asks llama.cpp for the probabilities along with the
// token; the token chosen is the same), and the sequence's state after it
// (saveStateToFile: llama.cpp's llama_state_seq_save_file). Per erase, the
// ranges and the state after. Nothing the engine computes changes.
import fs from "node:fs";
import path from "node:path";

const RECORDER = "kvscope interop/llamacpp/recorder.mjs 1";

export class Recorder {
  constructor(dir, {engine = "node-llama-cpp 3.21.1"} = {}) {
    this.dir = dir;
    this.engine = engine;
    this.models = {};
    this.events = [];
    this.committed = null;
    this.complete = true;
    fs.mkdirSync(dir, {recursive: true});
  }

  watch(sequence, role, {gguf, modelDir}) {
    if (this.models[role]) throw new Error(`role ${role} is watched already`);
    this.models[role] = {gguf: path.resolve(gguf), model_dir: path.resolve(modelDir)};
    return new RecordedSequence(this, sequence, role);
  }

  commit(ids) {
    this.committed = [...ids];
  }

  async close() {
    const log = {format: "kvscope-llamacpp-log", version: 1, engine: this.engine, recorder: RECORDER,
      complete: this.complete, models: this.models, events: this.events, committed: this.committed};
    const file = path.join(this.dir, "log.json");
    fs.writeFileSync(`${file}.partial`, JSON.stringify(log));
    fs.renameSync(`${file}.partial`, file);
    return file;
  }

  async saveState(role, sequence) {
    const name = `${role}-${this.events.length}.state`;
    await sequence.saveStateToFile(path.join(this.dir, name));
    return name;
  }
}

const tokenOf = (item) => (Array.isArray(item) ? item[0] : item);

// The log-probabilities of the outputs, when they are the last r inputs (the
// capture format's rows); null otherwise.
function logitRows(input, result) {
  const wanted = input.map((item) => Array.isArray(item) && item[1]?.generateNext != null);
  const r = wanted.length - wanted.lastIndexOf(false) - 1;
  if (r === 0 || wanted.slice(0, wanted.length - r).some(Boolean)) return null;
  const rows = [];
  for (let i = input.length - r; i < input.length; ++i) {
    const probabilities = result[i]?.next?.probabilities;
    if (probabilities == null) return null;
    rows.push(probabilities);
  }
  return rows;
}

class RecordedSequence {
  constructor(recorder, sequence, role) {
    this.recorder = recorder;
    this.sequence = sequence;
    this.role = role;
  }

  get nextTokenIndex() { return this.sequence.nextTokenIndex; }
  get contextTokens() { return this.sequence.contextTokens; }

  async controlledEvaluate(input, options) {
    // the probabilities come with the token the loop asked for
    const asked = input.map((item) => Array.isArray(item) && item[1]?.generateNext
      ? [item[0], {...item[1], generateNext: {...item[1].generateNext, probabilities: true}}]
      : item);
    const start = this.sequence.nextTokenIndex;
    const result = await this.sequence.controlledEvaluate(asked, options);
    await this.logEvaluate(input.map(tokenOf), start, logitRows(asked, result));
    return result;
  }

  async evaluateWithoutGeneratingNewTokens(tokens, options) {
    const start = this.sequence.nextTokenIndex;
    await this.sequence.evaluateWithoutGeneratingNewTokens(tokens, options);
    await this.logEvaluate([...tokens], start, null);
  }

  async eraseContextTokenRanges(ranges) {
    await this.sequence.eraseContextTokenRanges(ranges);
    const state = await this.recorder.saveState(this.role, this.sequence);
    this.recorder.events.push({role: this.role, op: "erase", ranges: ranges.map((r) => [r.start, r.end]), state});
  }

  async logEvaluate(tokens, start, rows) {
    const n = tokens.length;
    if (this.sequence.nextTokenIndex !== start + n) {
      this.recorder.complete = false;
      throw new Error(`recorder: ${this.role} moved from ${start} to ${this.sequence.nextTokenIndex} evaluating ${n} tokens (a context shift?)`);
    }
    const event = {role: this.role, op: "evaluate", tokens, positions: tokens.map((_, i) => start + i), state: null};
    if (rows != null) {
      const vocab = rows[0].size;  // the whole vocabulary: greedy sampling keeps every candidate
      const values = new Float32Array(rows.length * vocab).fill(Math.log(1e-45));
      rows.forEach((probabilities, r) => {
        for (const [token, p] of probabilities) values[r * vocab + token] = Math.log(Math.max(p, 1e-45));
      });
      const file = `${this.role}-${this.recorder.events.length}.logprobs`;
      fs.writeFileSync(path.join(this.recorder.dir, file), Buffer.from(values.buffer));
      event.logits = {rows: rows.length, file};
    }
    event.state = await this.recorder.saveState(this.role, this.sequence);
    this.recorder.events.push(event);
  }
}
