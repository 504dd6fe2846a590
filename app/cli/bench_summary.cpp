#include "app/cli/bench_summary.h"

#include <iomanip>
#include <sstream>

namespace kvscope::cli {
namespace {

// "12.3 ms (11.9-13.0, 5 trials)" from a timing object.
std::string timing(const nlohmann::json& t) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(t["median_ms"].get<double>() < 10 ? 3 : 1) << t["median_ms"].get<double>()
    << " ms (" << t["min_ms"].get<double>() << "-" << t["max_ms"].get<double>() << ", " << t["trials"] << " trials)";
  return s.str();
}

// "  weights stored: 988 MB (BFloat16 988 MB, Float 0.1 MB)"
void printWeights(std::ostream& out, const nlohmann::json& w) {
  out << "  weights " << w["residency"].get<std::string>() << ": " << w["resident_mb"].get<double>() << " MB (";
  bool first = true;
  for (const auto& [dtype, mb] : w["resident_mb_by_dtype"].items()) {
    out << (first ? "" : ", ") << dtype << " " << mb.get<double>() << " MB";
    first = false;
  }
  out << ")\n";
}

void printModels(std::ostream& out, const nlohmann::json& r) {
  const auto& m = r["machine"];
  out << "machine: " << m["cpu"].get<std::string>() << ", " << m["cores"] << " cores, " << m["torch_threads"]
      << " torch threads, " << m["memory"].get<std::string>() << ", libtorch " << m["libtorch"].get<std::string>()
      << "\n";
  for (const char* role : {"target", "drafter"}) {
    const auto& d = r[role];
    if (d.is_null()) continue;
    out << role << ": " << d["dir"].get<std::string>() << "\n  " << d["model"].get<std::string>() << ", "
        << d["parameters"] << " parameters; load " << timing(d["load"]) << "; peak RSS after the first load "
        << d["peak_rss_after_first_load_mb"].get<double>() << " MB (" << d["rss_before_load_mb"].get<double>()
        << " MB before)\n";
    if (d.contains("weights")) printWeights(out, d["weights"]);
  }
}

void printDecoding(std::ostream& out, const nlohmann::json& r) {
  const auto& a = r["autoregressive"];
  out << "autoregressive, " << a["prompt_tokens"] << "-token prompt + " << a["new_tokens"] << " new tokens:\n"
      << "  cache on  " << a["cache_on"]["tokens_per_second"].get<double>() << " tokens/s, " << timing(a["cache_on"])
      << "\n  cache off " << a["cache_off"]["tokens_per_second"].get<double>() << " tokens/s, "
      << timing(a["cache_off"]) << "\n";
  out << "one decode step by context (cache on | cache off):\n";
  for (const auto& e : r["decode_by_context"]) {
    out << "  " << std::setw(5) << e["context"].get<int64_t>() << "  ";
    if (e.contains("skipped")) {
      out << "skipped: " << e["skipped"].get<std::string>() << "\n";
      continue;
    }
    out << timing(e["cache_on"]) << " | " << (e["cache_off"].is_null() ? "not timed" : timing(e["cache_off"])) << "\n";
  }
  const auto& b = r["forward_vs_baseline"];
  out << "decode step at context " << b["decode_context"] << ": " << timing(b["decode_step"])
      << "; bare mv over the fp32 weights (" << b["weight_gb_fp32"].get<double>() << " GB): "
      << timing(b["bare_matvec_pass"]) << " = " << b["bare_matvec_gb_per_s"].get<double>() << " GB/s; ratio "
      << b["decode_over_bound"].get<double>() << "\n";
  // The floor: a step reads every stored weight once (core/bench/read_bound.h).
  out << "reading the stored weights once (" << b["weight_gb_stored"].get<double>() * 1000 << " MB): "
      << timing(b["weight_read_pass"]) << " = " << b["weight_read_gb_per_s"].get<double>()
      << " GB/s, the least a decode step can take here; the step is " << b["decode_over_read_bound"].get<double>()
      << " times that\n";
  // v without the session: the model's forward of gamma + 1 rows against its step (core/bench/verify_forward_bench.h).
  const auto& v = r["verify_forwards"];
  out << "a verify forward of gamma + 1 rows at context " << v["context"] << ", in decode steps (median of paired trials):";
  for (const auto& g : v["gammas"]) {
    out << " " << g["rows"] << " rows " << g["forward_over_step"]["median"].get<double>();
  }
  out << "\n";
  if (v.value("multiply_add_peak_per_s", nlohmann::json()).is_number()) {
    out << "  their matrix products alone at this machine's multiply-add peak ("
        << v["multiply_add_peak_per_s"].get<double>() / 1e9 << " G/s on the forward's threads, "
        << v["multiply_adds_per_row"] << " per row), in decode steps:";
    for (const auto& g : v["gammas"]) out << " " << g["rows"] << " rows " << g["products_at_peak_over_step"].get<double>();
    out << "\n";
  }
  out << "forward of " << b["prefill_rows"] << " tokens: " << timing(b["prefill_forward"]) << "; bare mm "
      << timing(b["bare_matmul_pass"]) << "; ratio " << b["prefill_over_bare"].get<double>() << "\n";
}

// The confidence stop the speculative sessions ran with (0: none).
double draftConfidence(const nlohmann::json& speculative) {
  return speculative.empty() ? 0.0 : speculative.front().value("draft_confidence", 0.0);
}

void printSpeculative(std::ostream& out, const nlohmann::json& r) {
  if (r["speculative"].is_null()) {
    out << "speculative: no drafter\n";
  } else if (const double stop = draftConfidence(r["speculative"]); stop > 0) {
    // The fixed-gamma formula does not describe rounds cut short: the drafts
    // a round made and its tokens are shown instead.
    out << "speculative (greedy), drafting stops after a draft below p = " << stop
        << ": gamma (at most), drafts per round, tokens per round, alpha of those drafts, c, v, measured (min-max)\n";
    for (const auto& g : r["speculative"]) {
      const auto& m = g["measured_speedup"];
      out << "  " << g["gamma"] << "  " << g["drafts_per_round"]["median"].get<double>() << "  "
          << g["mean_accepted_length"]["median"].get<double>() << "  " << g["alpha"].get<double>() << "  "
          << g["cost_ratio"].get<double>() << "  " << g["verify_over_step"].get<double>() << "  "
          << m["median"].get<double>() << " (" << m["min"].get<double>() << "-" << m["max"].get<double>() << ")\n";
    }
  } else {
    out << "speculative (greedy): gamma, alpha, c (drafter step / target step), v (verify forward / target step), "
           "theoretical (verify = 1 step), with the verify at v, measured (min-max), measured / theoretical, "
           "measured / with the verify at v\n";
    for (const auto& g : r["speculative"]) {
      const auto& m = g["measured_speedup"];
      out << "  " << g["gamma"] << "  " << g["alpha"].get<double>() << "  " << g["cost_ratio"].get<double>() << "  "
          << g["verify_over_step"].get<double>() << "  " << g["theoretical_speedup"].get<double>() << "  "
          << g["verify_priced_speedup"].get<double>() << "  " << m["median"].get<double>() << " ("
          << m["min"].get<double>() << "-" << m["max"].get<double>() << ")  "
          << g["measured_over_theoretical"].get<double>() << "  " << g["measured_over_verify_priced"].get<double>()
          << "\n";
    }
  }
  const auto& t = r["tracing"];
  out << "tracing (attention + logits recorded) on " << timing(t["tracing_on"]) << " vs off "
      << timing(t["tracing_off"]) << ": overhead " << 100 * t["overhead"].get<double>() << "%\n";
  out << "peak RSS " << r["memory"]["peak_rss_mb"].get<double>() << " MB\n";
}

}  // namespace

void printBenchSummary(std::ostream& out, const nlohmann::json& report) {
  out << std::fixed << std::setprecision(3);
  printModels(out, report);
  printDecoding(out, report);
  printSpeculative(out, report);
}

}  // namespace kvscope::cli
