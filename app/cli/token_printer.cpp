#include "app/cli/token_printer.h"

#include <iomanip>

namespace kvscope::cli {
namespace {

const char* kReset = "\033[0m";
const char* kAccepted = "\033[32m";
const char* kCorrection = "\033[33m";
const char* kBonus = "\033[36m";
const char* kRejected = "\033[9;31m";

void piece(std::ostream& out, const std::string& text, const char* style, const char* plain_open,
           const char* plain_close, bool colour) {
  if (colour) out << style << text << kReset;
  else out << plain_open << text << plain_close;
}

}  // namespace

void printColouredRounds(std::ostream& out, const Session& session, const Tokenizer& tokenizer, bool colour) {
  const auto& seq = session.sequence();
  out << tokenizer.decode(std::vector<int64_t>(seq.begin(), seq.begin() + session.promptLength()));
  for (const RoundRecord& r : session.rounds()) {
    if (r.index == 0) continue;
    const int64_t kept = std::min<int64_t>(r.accepted, static_cast<int64_t>(r.emitted.size()));
    for (int64_t i = 0; i < kept; ++i) piece(out, tokenizer.tokenText(r.drafts[i]), kAccepted, "", "", colour);
    for (size_t i = r.accepted; i < r.drafts.size(); ++i) {
      piece(out, tokenizer.tokenText(r.drafts[i]), kRejected, "[-", "-]", colour);
    }
    if (static_cast<int64_t>(r.emitted.size()) > r.accepted) {
      piece(out, tokenizer.tokenText(r.next_token), r.bonus ? kBonus : kCorrection, r.bonus ? "{+" : "{",
            "}", colour);
    }
  }
  out << "\n";
  if (colour) {
    out << "\n" << kAccepted << "accepted draft" << kReset << "  " << kCorrection << "correction" << kReset << "  "
        << kBonus << "bonus" << kReset << "  " << kRejected << "rejected draft" << kReset << "\n";
  } else {
    out << "\n(plain = accepted draft, {x} = correction, {+x} = bonus, [-x-] = rejected draft)\n";
  }
}

void printMetrics(std::ostream& out, const Metrics& m) {
  out << std::fixed << std::setprecision(3);
  out << "rounds " << m.rounds << ", generated " << m.generated << " tokens, drafted " << m.drafted << ", accepted "
      << m.accepted << "\n";
  out << "alpha (accepted / drafted) " << m.alpha << ", mean accepted length per round (incl. correction/bonus) "
      << m.mean_accepted_length << ", mean gamma " << m.mean_gamma << "\n";
  out << "acceptance by draft position:";
  for (double a : m.acceptance_at_position) out << " " << a;
  out << "\n";
  out << "forwards: target " << m.target_forwards << " (" << m.target_ms << " ms), drafter " << m.drafter_forwards << " ("
      << m.drafter_ms << " ms); cost ratio c " << m.cost_ratio << "\n";
  out << "theoretical speedup (1 - a^(g+1)) / ((1 - a)(g c + 1)) = " << m.theoretical_speedup << "\n";
}

}  // namespace kvscope::cli
