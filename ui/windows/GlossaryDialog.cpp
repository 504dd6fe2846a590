#include "ui/windows/GlossaryDialog.h"

#include <QDialog>
#include <QDir>
#include <QFileInfo>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <QWidget>

namespace kvscope::ui {

namespace {
struct Term {
  const char* term;
  const char* meaning;
};

// In the order a class meets them. Numbers follow the exact bookkeeping of docs/architecture.md.
const Term kTerms[] = {
    {"target", "The large model whose output we want. It checks the drafts in one forward pass (verify)."},
    {"drafter", "The small, fast model (or an n-gram lookup) that guesses the next gamma tokens."},
    {"KV cache", "Per layer and kv head, the K (key) and V (value) vectors of every token fed so far, so a new token "
                 "computes its own K and V only and attends to the stored ones instead of recomputing the prefix."},
    {"row", "One cache entry: the K and V of one token in one layer. kvscope labels each row by its identity (token, "
            "position, the round and phase that wrote it), because in a broken cache row i need not hold position i."},
    {"position", "A token's index in the sequence (0 = the first prompt token). A correct cache's row i holds position i."},
    {"prefill", "Round 0: the prompt (all but its last token) fed in one forward; each cache then holds L - 1 rows."},
    {"decode", "Feeding one new token at a time: each forward appends exactly one row per layer, so the cache grows one "
               "row per token."},
    {"round", "One speculative step: draft, verify, accept, prune. It turns the sequence of length L into L' = L + n + 1."},
    {"phase", "One of draft, verify, accept, prune (and the prefill). F10 steps one phase, F11 one round."},
    {"gamma (\u03b3)", "How many tokens the drafter proposes per round. Adaptive gamma changes it from round to round."},
    {"draft", "The drafter feeds x[L-1], then each draft: its cache grows to L - 1 + gamma rows."},
    {"verify", "The target feeds x[L-1] and the gamma drafts in one forward (L + gamma rows), getting p_1 .. p_gamma+1."},
    {"accept", "Draft d_i is kept with probability min(1, p_i(d_i) / q_i(d_i)) (greedy: iff it is the target's argmax). "
               "n counts the drafts accepted before the first rejection."},
    {"n", "The number of drafts accepted this round (0 .. gamma)."},
    {"correction", "At the first rejection (draft n + 1) a token drawn from norm(max(0, p - q)) (greedy: argmax p) "
                   "replaces the rejected draft."},
    {"bonus", "When all gamma drafts are accepted, one extra token drawn from p_gamma+1: the round yields gamma + 1 tokens."},
    {"prune", "Cutting both caches back to L + n rows (L' - 1). The target drops gamma - n rows, the drafter "
              "gamma - n - 1; when all are accepted the drafter is one row short and feeds d_gamma first next round "
              "(the catch-up). Cut by length, never by slicing [:-k], where k = 0 wipes everything."},
    {"bookkeeping", "How many rows the prune keeps. exact keeps L + n. seed (romsto/Speculative-Decoding's prune_cache: "
                    "target gamma - n + 1, drafter gamma - n) keeps one fewer and re-feeds the last token: safe, one "
                    "recompute more. Pruning less than exact is a bug."},
    {"alpha (\u03b1)", "The acceptance rate: drafts accepted / drafts proposed. Higher alpha, more tokens per target forward."},
    {"tokens/round", "Mean tokens a round yields (n + 1); with the cost ratio of the two models it gives the theoretical speedup."},
    {"q, p", "q(x): the drafter's probability of a token; p(x): the target's. The token strip shows both for every draft."},
    {"Q, K, V", "Query, key and value: three projections of a token's hidden state. The query of the token being "
                "computed is compared with every cached key; the weights mix the cached values."},
    {"rotary embedding (RoPE)", "Llama-family models rotate pairs of q and k channels by an angle proportional to the "
                                "position, so q\u00b7k depends on the distance. GPT-2 has no rotary embedding (learned positions)."},
    {"scale", "Scores are multiplied by 1/sqrt(head_dim) before the softmax, so they do not grow with the head size."},
    {"mask", "The causal mask: a query sees only keys at its own and earlier positions (and inside a sliding window if any)."},
    {"softmax / weights", "Turns the scaled, masked scores into attention weights that sum to 1."},
    {"kv head, GQA", "Grouped-query attention: several query heads share one K/V head; the cache stores kv heads only."},
    {"o_proj", "The output projection that mixes the heads' outputs back into the hidden state."},
    {"ledger", "The record of every cache entry: cache, position, token, the round and phase that wrote it, and the "
               "round and reason it was removed."},
    {"written / kept / pruned", "In the KV view: rows written this round, rows from earlier rounds, and rows removed this "
                                "round (faded)."},
    {"stale", "Audit verdict: the row holds K/V the bookkeeping says should be gone (a rejected draft, or computed at a "
              "superseded position)."},
    {"missing / duplicate", "Audit verdicts: a row the bookkeeping expects is absent; a position held twice."},
    {"wrong_position / wrong_values", "Audit verdicts: the row's rotary (or learned) position is not its position; its K/V "
                                      "differ from a fresh recomputation beyond the tolerance."},
    {"audit", "Recomputes K and V of the current sequence from scratch and compares them with the cache, per layer, "
              "head and row (tolerance 1e-4 + 1e-3 relative)."},
    {"diff", "Cached vs uncached: the same tokens run with and without the cache, compared per position."},
    {"max |\u0394 logit|", "The largest difference of any logit between the cached and uncached run at a position. "
                           "A correct fp32 cache agrees to about 1e-4."},
    {"KL", "KL(p_uncached || p_cached): how far the cached next-token distribution drifts from the uncached one (0: identical)."},
    {"margin", "The gap between the top-1 and top-2 probabilities. A top-1 flip inside float noise with a tiny margin "
               "is not a bug; a flip with a wide margin is."},
    {"agree / float noise / divergent", "The diff's verdict per position: identical, different within float tolerance, "
                                        "or different (a cache bug)."},
    {"first divergence", "The first position where the cached run departs from the uncached one."},
    {"root cause", "The first cache operation that broke the bookkeeping's contract (wrong row count or wrong rows)."},
    {"fault", "An injected cache bug from the bug zoo (Session panel), each mirroring a real one; its tooltip says what "
              "it breaks and which real bug it mirrors."},
    {"what if", "Attention Step by Step: remove cache rows (or zero K/V channels) and see the recomputed weights, output "
                "and the change of the next-token distribution."},
};
}  // namespace

QString glossaryHtml() {
  QString html = QStringLiteral("<h2>Glossary</h2><dl>");
  for (const Term& t : kTerms) {
    html += QStringLiteral("<dt><b>%1</b></dt><dd>%2</dd>")
                .arg(QString::fromUtf8(t.term).toHtmlEscaped(), QString::fromUtf8(t.meaning).toHtmlEscaped());
  }
  return html + QStringLiteral("</dl>");
}

void showGlossary(QWidget* parent) {
  auto* dialog = parent->findChild<QDialog*>(QStringLiteral("glossaryDialog"));
  if (!dialog) {
    dialog = new QDialog(parent);
    dialog->setObjectName(QStringLiteral("glossaryDialog"));
    dialog->setWindowTitle(QObject::tr("kvscope glossary"));
    auto* text = new QTextBrowser;
    text->setObjectName(QStringLiteral("glossaryText"));
    text->setHtml(glossaryHtml());
    auto* layout = new QVBoxLayout(dialog);
    layout->addWidget(text);
    dialog->resize(560, 600);
  }
  dialog->show();
  dialog->raise();
}

QString aboutText() {
  // The README next to an installed build, else the source tree's.
  QString readme = QStringLiteral(KVSCOPE_INSTALL_DATADIR "/README.md");
  if (!QFileInfo::exists(readme)) readme = QStringLiteral(KVSCOPE_SOURCE_DIR "/README.md");
  return QObject::tr("<p><b>kvscope</b> is a debugger and teaching tool for the KV cache of transformer language "
                     "models during speculative decoding. It runs real models (GPT-2 and the Llama family) with the "
                     "cache on or off, one speculative round and phase at a time, records every cache entry, shows "
                     "K, V and attention per layer and head, and diffs cached against uncached runs to find the first "
                     "cache operation that went wrong.</p>"
                     "<p>Lessons (Lessons menu) walk a class through prefill, Q/K/V, a speculative round, pruning, an "
                     "injected cache bug and what removing cache entries costs. Help &gt; Glossary explains the terms.</p>"
                     "<p>README (build, usage, the bug zoo, \"Teaching with kvscope\"): <a href=\"%1\">%2</a></p>")
      .arg(QUrl::fromLocalFile(readme).toString(), readme.toHtmlEscaped());
}

}  // namespace kvscope::ui
