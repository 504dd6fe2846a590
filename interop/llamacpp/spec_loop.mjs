// A greedy speculative-decoding loop over two llama.cpp sequences (target and
// drafter), written the way a node-llama-cpp user would write one, with
// the exact bookkeeping of docs/architecture.md: at the start of a round both caches hold
// every token but the last; the drafter feeds what it lacks and drafts gamma
// tokens one call each; the target verifies [last, drafts] in one call; the
// rejected cells are erased (the target keeps L+n, the drafter up to L+n).
//
// `bug` injects one of the cache bugs `kvscope-cli check` must name:
//   keep_one_rejected  the target erases one cell too few after a rejection
//   reset              the target erases everything instead of rolling back
//   skip_position      after a round that accepts every draft, the drafter,
//                      one token short, is fed only the bonus token: d_gamma
//                      is never fed and the bonus lands on its position
//   repeat_position    after a rejection the next verify feeds the token
//                      before it again (a position the cache already holds)
// keep_one_rejected, reset and repeat_position act from the first round that
// rejects a draft, skip_position from the first that accepts them all;
// `firstBuggy` is the {role, call} that first sees the bug (what check must name).

export async function speculativeGreedy({target, drafter, prompt, newTokens, gamma = 4, bug = null}) {
  const x = [...prompt];
  await target.evaluateWithoutGeneratingNewTokens(x.slice(0, -1));
  await drafter.evaluateWithoutGeneratingNewTokens(x.slice(0, -1));
  let targetCalls = 1, drafterCalls = 1, rounds = 0, accepted = 0;
  let firstBuggy = null, buggy = false;
  const greedy = (t) => [t, {generateNext: {token: true, options: {temperature: 0}}}];
  while (x.length - prompt.length < newTokens) {
    const L = x.length;
    // draft: feed what the drafter lacks (one token, two after a fully accepted round)
    const drafts = [];
    let feed = x.slice(drafter.nextTokenIndex, L);
    if (bug === "skip_position" && feed.length > 1) {
      feed = feed.slice(-1);
      firstBuggy ??= {role: "drafter", call: drafterCalls};
    }
    for (let k = 0; k < gamma; ++k) {
      const res = await drafter.controlledEvaluate(feed.map((t, i) => (i === feed.length - 1 ? greedy(t) : t)));
      ++drafterCalls;
      drafts.push(res[feed.length - 1].next.token);
      feed = [drafts[k]];
    }
    // verify
    let verify = [x[L - 1], ...drafts];
    if (buggy && bug === "repeat_position") {
      verify = [x[L - 2], x[L - 1], ...drafts];
      firstBuggy ??= {role: "target", call: targetCalls};
    }
    const res = await target.controlledEvaluate(verify.map(greedy));
    ++targetCalls;
    // the target's choice after last, d1, ..., d_gamma (a skipped input leaves a gap: no match)
    const preds = verify.map((_, i) => res[i].next.token);
    const p = preds.slice(-(gamma + 1));
    while (p.length < gamma + 1) p.unshift(-1);
    let n = 0;
    while (n < gamma && drafts[n] === p[n]) ++n;
    if (p[n] < 0) p[n] = preds[0];
    accepted += n;
    ++rounds;
    // prune
    const targetHolds = target.nextTokenIndex;
    let keep = L + n;
    if (n < gamma && !buggy && bug) {
      buggy = true;
      if (bug === "keep_one_rejected" || bug === "reset") firstBuggy = {role: "target", call: targetCalls};
    }
    if (buggy && bug === "keep_one_rejected" && n < gamma) keep = L + n + 1;
    if (buggy && bug === "reset" && n < gamma) keep = 0;
    if (keep < targetHolds) await target.eraseContextTokenRanges([{start: keep, end: targetHolds}]);
    if (L + n < drafter.nextTokenIndex) await drafter.eraseContextTokenRanges([{start: L + n, end: drafter.nextTokenIndex}]);
    x.push(...drafts.slice(0, n), p[n]);
  }
  return {ids: x.slice(0, prompt.length + newTokens), rounds, accepted, targetCalls, drafterCalls, firstBuggy};
}
