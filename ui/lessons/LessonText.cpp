#include "ui/lessons/LessonText.h"

#include <QRegularExpression>
#include <algorithm>
#include <cmath>

#include "core/cache/fault.h"
#include "ui/widgets/DisplayToken.h"

namespace kvscope::ui {

namespace {

// name -> what it stands for; the order is the help's.
const QVector<QPair<QString, QString>>& nameTable() {
  static const QVector<QPair<QString, QString>> table = {
      {"prompt_length", "tokens in the prompt"},
      {"prompt_rows", "rows each cache holds after the prefill (prompt_length - 1: the last prompt token is fed by round 1)"},
      {"target_rows", "rows the target cache holds at the cursor (layer 0)"},
      {"drafter_rows", "rows the drafter cache holds at the cursor (layer 0)"},
      {"drafter_rows_note", "why the drafter holds as many rows as the target at the cursor, or one fewer"},
      {"sequence_length", "tokens in the sequence at the cursor's round end"},
      {"round", "the cursor's round"},
      {"phase", "the cursor's phase"},
      {"L", "tokens in the sequence when the cursor's round began"},
      {"L_minus_1", "L - 1: rows each cache holds at the round's start"},
      {"gamma", "drafts proposed in the cursor's round"},
      {"n", "drafts accepted in the cursor's round"},
      {"rejected", "drafts rejected in the cursor's round (gamma - n)"},
      {"drafts", "the round's drafts, as text"},
      {"accepted_drafts", "the accepted drafts, as text"},
      {"next_token", "the correction or bonus token, as text"},
      {"next_kind", "'correction' or 'bonus'"},
      {"drafter_after_draft", "drafter rows after the draft phase (L - 1 + gamma)"},
      {"target_after_verify", "target rows after the verify phase (L + gamma)"},
      {"new_length", "L' = L + n + 1, the sequence after the round"},
      {"kept", "L' - 1 = L + n, rows each cache must hold after the prune"},
      {"target_drop", "rows the target drops (gamma - n)"},
      {"drafter_drop", "rows the drafter drops (gamma - n - 1; 0 when all are accepted)"},
      {"drafter_catch_up", "rows the drafter feeds first next round (1 when all are accepted, else 0)"},
      {"romsto_target_drop", "romsto/Speculative-Decoding's target drop (gamma - n + 1)"},
      {"romsto_drafter_drop", "romsto/Speculative-Decoding's drafter drop (gamma - n)"},
      {"romsto_target_kept", "target rows left by that formula (L + n - 1, one fewer than needed)"},
      {"position", "the cursor's sequence position"},
      {"token", "the token at the cursor's position, as text"},
      {"layer", "the cursor's layer"},
      {"head", "the cursor's kv head"},
      {"layers", "target layers"},
      {"heads", "target query heads"},
      {"kv_heads", "target kv heads"},
      {"head_dim", "the target's head dimension"},
      {"scale", "1 / sqrt(head_dim)"},
      {"fault", "the injected fault's name"},
      {"fault_breaks", "what the fault breaks"},
      {"fault_real_world", "the real bug the fault mirrors"},
      {"diff_explanation", "the diff's explanation (symptom and cause)"},
      {"root_cause", "the diff's root cause in one sentence"},
      {"root_round", "the round of the diff's root cause"},
      {"root_expected", "rows the bookkeeping expected at the root cause"},
      {"root_actual", "rows the cache held at the root cause"},
      {"batch", "sequences decoded together (1 without a batch)"},
      {"shown_sequence", "the batch's sequence the views show (the Batch picker's)"},
      {"batch_accepted", "drafts each sequence accepted in the cursor's round, e.g. 'sequence 0: 1, sequence 1: 3'"},
      {"batch_accepted_fewest", "the fewest drafts any sequence accepted in the cursor's round"},
      {"batch_accepted_most", "the most drafts any sequence accepted in the cursor's round"},
      {"uniform_extra", "rows of rejected drafts the shown sequence would keep if every sequence advanced by the most any accepted (batch_accepted_most - n)"},
      {"block_size", "rows per block of the paged target cache"},
      {"pool_blocks", "blocks in the target's pool at the cursor's moment"},
      {"pool_free", "free blocks in the target's pool at the cursor's moment"},
      {"pool_frees", "frees in the target pool's block log up to the cursor's moment"},
      {"shown_blocks", "blocks the shown sequence's target block table maps at the cursor's moment"},
      {"shown_table", "the shown sequence's target block table, logical block -> pool block"},
      {"shown_dangling", "entries of that table freed but still mapped (dangling)"},
      {"verify_blocks", "blocks the target's rows need after the cursor round's verify (L + gamma rows)"},
      {"kept_blocks", "blocks the target's rows need after its prune (L + n rows)"},
      {"rollback_freed_blocks", "whole blocks the cursor round's rollback frees (verify_blocks - kept_blocks)"},
      {"kept_block_slack", "offsets of the last kept block left for later rows (kept_blocks * block_size - (L + n))"},
      {"alpha", "acceptance rate so far"},
      {"generated", "tokens generated so far"},
      {"rounds", "rounds run so far"},
  };
  return table;
}

QString tokens(const SessionSnapshot& snapshot, const std::vector<int64_t>& ids) {
  QStringList parts;
  for (int64_t id : ids) parts << QStringLiteral("'%1'").arg(displayToken(snapshot.tokenText(id)).toHtmlEscaped());
  return parts.isEmpty() ? QStringLiteral("(none)") : parts.join(QStringLiteral(" "));
}

QString rowsAt(const SessionSnapshot& snapshot, CacheRole cache, const Cursor& cursor) {
  if (!snapshot.geometry(cache).present || !cursor.valid()) return QStringLiteral("0");
  return QString::number(physicalRows(snapshot, cache, 0, cursor.moment()).size());
}

void roundValues(const SessionSnapshot& snapshot, const RoundRecord& r, QMap<QString, QString>& v) {
  const int64_t gamma = static_cast<int64_t>(r.drafts.size());
  const int64_t n = r.accepted;
  v["L"] = QString::number(r.start_length);
  v["L_minus_1"] = QString::number(r.start_length - 1);
  v["gamma"] = QString::number(gamma);
  v["n"] = QString::number(n);
  v["rejected"] = QString::number(gamma - n);
  v["drafts"] = tokens(snapshot, r.drafts);
  v["accepted_drafts"] = tokens(snapshot, std::vector<int64_t>(r.drafts.begin(), r.drafts.begin() + std::min(n, gamma)));
  v["next_token"] = r.next_token >= 0 ? tokens(snapshot, {r.next_token}) : QStringLiteral("(not drawn yet)");
  v["next_kind"] = r.bonus ? QStringLiteral("bonus") : QStringLiteral("correction");
  v["drafter_after_draft"] = QString::number(r.start_length - 1 + gamma);
  v["target_after_verify"] = QString::number(r.start_length + gamma);
  v["new_length"] = QString::number(r.start_length + n + 1);
  v["kept"] = QString::number(r.start_length + n);
  v["target_drop"] = QString::number(gamma - n);
  v["drafter_drop"] = QString::number(std::max<int64_t>(gamma - n - 1, 0));
  v["drafter_catch_up"] = QString::number(n == gamma ? 1 : 0);
  v["romsto_target_drop"] = QString::number(gamma - n + 1);
  v["romsto_drafter_drop"] = QString::number(gamma - n);
  v["romsto_target_kept"] = QString::number(r.start_length + n - 1);
}

// Between rounds the drafter holds the target's rows, except after a round
// that accepted every draft: it never fed its last draft and is one short.
QString drafterNote(const SessionSnapshot& snapshot, const Cursor& cursor, const QString& target, const QString& drafter) {
  if (target == drafter) return QStringLiteral("the same number of rows");
  const RoundRecord* r = cursor.round >= 1 ? snapshot.round(cursor.round) : nullptr;
  if (r && r->accepted == static_cast<int64_t>(r->drafts.size()) && drafter.toLongLong() + 1 == target.toLongLong()) {
    return QStringLiteral("one row fewer: round %1 accepted every draft, so the drafter never fed its last one; it "
                          "feeds it first next round (lesson 4)")
        .arg(r->index);
  }
  return QStringLiteral("a different number of rows (the drafter is mid-round or the session injects a fault)");
}

Fault faultOf(const std::string& name) {
  try {
    return parseFault(name);
  } catch (const std::exception&) {
    return Fault::None;  // a trace from a newer kvscope: say nothing rather than fail
  }
}

// Per sequence of a batch, the drafts it accepted in `round` (-1 where it had no such round).
std::vector<int64_t> acceptedIn(const SessionSnapshot& snapshot, int64_t round) {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& accepted : snapshot.batch_accepted) {
    out.push_back(round >= 0 && round < static_cast<int64_t>(accepted.size()) ? accepted[static_cast<size_t>(round)] : -1);
  }
  return out;
}

void batchValues(const SessionSnapshot& snapshot, const Cursor& cursor, QMap<QString, QString>& v) {
  v["batch"] = QString::number(std::max<size_t>(snapshot.batch_accepted.size(), 1));
  v["shown_sequence"] = QString::number(snapshot.shown_sequence);
  const RoundRecord* r = cursor.round >= 1 ? snapshot.round(cursor.round) : nullptr;
  std::vector<int64_t> accepted = acceptedIn(snapshot, cursor.round);
  if (accepted.empty() && r) accepted.push_back(r->accepted);  // one sequence
  QStringList parts;
  int64_t fewest = -1, most = -1;
  for (size_t b = 0; b < accepted.size(); ++b) {
    if (accepted[b] < 0) continue;
    parts << QStringLiteral("sequence %1: %2").arg(b).arg(accepted[b]);
    fewest = fewest < 0 ? accepted[b] : std::min(fewest, accepted[b]);
    most = std::max(most, accepted[b]);
  }
  if (parts.isEmpty()) return;
  v["batch_accepted"] = parts.join(QStringLiteral(", "));
  v["batch_accepted_fewest"] = QString::number(fewest);
  v["batch_accepted_most"] = QString::number(most);
  if (r) v["uniform_extra"] = QString::number(most - r->accepted);
}

int64_t blocksFor(int64_t rows, int64_t block_size) { return (rows + block_size - 1) / block_size; }

// The target's pool at the cursor's moment (as the Paged pool tab draws it),
// and what the cursor's round's rollback frees, in whole blocks.
void poolValues(const SessionSnapshot& snapshot, const Cursor& cursor, QMap<QString, QString>& v) {
  const std::shared_ptr<const PoolView> shown =
      cursor.valid() ? poolAt(snapshot, CacheRole::Target, cursor.moment()) : snapshot.target_pool;
  const PoolView* pool = shown.get();
  if (!pool || pool->block_size <= 0) return;
  const int64_t size = pool->block_size;
  v["block_size"] = QString::number(size);
  v["pool_blocks"] = QString::number(pool->blocks.size());
  v["pool_free"] = QString::number(pool->freeBlocks());
  v["pool_frees"] = QString::number(std::count_if(pool->log.begin(), pool->log.end(),
                                                  [](const PoolLogEntry& e) { return e.operation == "free"; }));
  if (const PoolSequenceTable* table = pool->table(snapshot.shown_sequence)) {
    v["shown_blocks"] = QString::number(table->entries.size());
    QStringList entries;
    for (const PoolTableEntry& e : table->entries) entries << QStringLiteral("L%1 \u2192 %2").arg(e.logical).arg(e.block);
    v["shown_table"] = entries.isEmpty() ? QStringLiteral("(empty)") : entries.join(QStringLiteral(", "));
    v["shown_dangling"] = QString::number(std::count_if(table->entries.begin(), table->entries.end(),
                                                        [](const PoolTableEntry& e) { return e.dangling; }));
  }
  if (const RoundRecord* r = cursor.round >= 1 ? snapshot.round(cursor.round) : nullptr) {
    const int64_t after_verify = r->start_length + static_cast<int64_t>(r->drafts.size());
    const int64_t kept = r->start_length + r->accepted;
    v["verify_blocks"] = QString::number(blocksFor(after_verify, size));
    v["kept_blocks"] = QString::number(blocksFor(kept, size));
    v["rollback_freed_blocks"] = QString::number(blocksFor(after_verify, size) - blocksFor(kept, size));
    v["kept_block_slack"] = QString::number(blocksFor(kept, size) * size - kept);
  }
}

}  // namespace

QStringList lessonTextNames() {
  QStringList names;
  for (const auto& [name, help] : nameTable()) names << name;
  return names;
}

QString lessonTextNameHelp() {
  QString text;
  for (const auto& [name, help] : nameTable()) text += QStringLiteral("{%1}: %2\n").arg(name, help);
  return text;
}

QMap<QString, QString> lessonTextValues(const SessionSnapshot& snapshot, const Cursor& cursor) {
  QMap<QString, QString> v;
  for (const QString& name : lessonTextNames()) v[name] = QStringLiteral("?");
  v["prompt_length"] = QString::number(snapshot.prompt_length);
  v["prompt_rows"] = QString::number(std::max<int64_t>(snapshot.prompt_length - 1, 0));
  v["target_rows"] = rowsAt(snapshot, CacheRole::Target, cursor);
  v["drafter_rows"] = rowsAt(snapshot, CacheRole::Drafter, cursor);
  v["drafter_rows_note"] = drafterNote(snapshot, cursor, v["target_rows"], v["drafter_rows"]);
  v["round"] = QString::number(cursor.round);
  v["phase"] = QString::fromUtf8(phaseName(cursor.phase));
  if (const RoundRecord* r = cursor.round >= 1 ? snapshot.round(cursor.round) : nullptr) {
    roundValues(snapshot, *r, v);
    v["sequence_length"] = QString::number(r->start_length + static_cast<int64_t>(r->emitted.size()));
  } else {
    v["sequence_length"] = QString::number(snapshot.prompt_length);
  }
  v["position"] = QString::number(cursor.position);
  if (cursor.position >= 0 && cursor.position < static_cast<int64_t>(snapshot.sequence.size())) {
    v["token"] = tokens(snapshot, {snapshot.sequence[static_cast<size_t>(cursor.position)]});
  }
  v["layer"] = QString::number(cursor.layer);
  v["head"] = QString::number(cursor.head);
  v["layers"] = QString::number(snapshot.target.layers);
  v["heads"] = QString::number(snapshot.target.heads);
  v["kv_heads"] = QString::number(snapshot.target.kv_heads);
  v["head_dim"] = QString::number(snapshot.target.head_dim);
  if (snapshot.target.head_dim > 0) v["scale"] = QString::number(1.0 / std::sqrt(double(snapshot.target.head_dim)), 'g', 4);
  const FaultInfo& fault = faultInfo(faultOf(snapshot.fault));
  v["fault"] = QString::fromStdString(snapshot.fault).toHtmlEscaped();
  v["fault_breaks"] = QString::fromUtf8(fault.breaks).toHtmlEscaped();
  v["fault_real_world"] = QString::fromUtf8(fault.real_world).toHtmlEscaped();
  if (snapshot.diff) {
    v["diff_explanation"] = QString::fromStdString(snapshot.diff->explanation()).toHtmlEscaped();
    if (const auto& cause = snapshot.diff->root_cause) {
      v["root_cause"] = QString::fromStdString(cause->what).toHtmlEscaped();
      v["root_round"] = QString::number(cause->round);
      v["root_expected"] = QString::number(cause->expected_rows);
      v["root_actual"] = QString::number(cause->actual_rows);
    } else {
      v["root_cause"] = QStringLiteral("none: the cache kept its contract");
    }
  }
  batchValues(snapshot, cursor, v);
  poolValues(snapshot, cursor, v);
  v["alpha"] = QString::number(snapshot.metrics.alpha, 'f', 2);
  v["generated"] = QString::number(snapshot.metrics.generated);
  v["rounds"] = QString::number(snapshot.metrics.rounds);
  return v;
}

QString fillLessonText(const QString& text, const SessionSnapshot* snapshot, const Cursor& cursor) {
  if (!snapshot) return text;
  const QMap<QString, QString> values = lessonTextValues(*snapshot, cursor);
  static const QRegularExpression pattern(QStringLiteral("\\{([A-Za-z_][A-Za-z0-9_]*)\\}"));
  QString out;
  qsizetype last = 0;
  for (auto it = pattern.globalMatch(text); it.hasNext();) {
    const QRegularExpressionMatch match = it.next();
    out += text.mid(last, match.capturedStart() - last);
    out += QStringLiteral("<b>%1</b>").arg(values.value(match.captured(1), match.captured(0)));
    last = match.capturedEnd();
  }
  return out + text.mid(last);
}

}  // namespace kvscope::ui
