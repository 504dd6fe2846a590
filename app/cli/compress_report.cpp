#include "app/cli/compress_report.h"

#include <cstdio>
#include <iomanip>
#include <sstream>

#include <torch/types.h>

namespace kvscope::cli {

using nlohmann::json;

namespace {

std::string percent(double fraction) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(0) << fraction * 100 << "%";
  return out.str();
}

std::string budgetText(const EvictionBudget& budget) {
  return budget.rows > 0 ? std::to_string(budget.rows) + " rows" : percent(budget.fraction);
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

json specJson(const CompressionSpec& spec) {
  json j = json::object();
  if (spec.eviction) {
    const EvictionSettings& e = *spec.eviction;
    j["policy"] = evictionPolicyName(e.policy);
    j["budget"] = e.budget.rows > 0 ? json(e.budget.rows) : json(e.budget.fraction);
    j["budget_is_rows"] = e.budget.rows > 0;
    j["demote_bits"] = e.demote_bits;
    // The policy's parameters, so a row of a table can be run again.
    j["sinks"] = e.sinks;
    j["window"] = e.window;  // -1: the policy's default
    j["kernel"] = e.kernel;
    j["seed"] = e.seed;
  }
  if (spec.pruning) {
    const PruneSettings& p = *spec.pruning;
    j["prune"] = {{"axis", pruneAxisName(p.axis)}, {"score", elementScoreName(p.score)},
                  {"k_sparsity", p.k_sparsity}, {"v_sparsity", p.v_sparsity}, {"dense_window", p.dense_window}};
  }
  return j;
}

json removedJson(const std::vector<RemovedRow>& removed) {
  json rows = json::array();
  for (const RemovedRow& r : removed) {
    rows.push_back({{"layer", r.layer}, {"kv_head", r.kv_head}, {"position", r.position}, {"score", r.score},
                    {"step", r.step}});
  }
  return rows;
}

json stepsJson(const std::vector<CompressionStep>& steps) {
  json out = json::array();
  for (const CompressionStep& s : steps) {
    out.push_back({{"position", s.position}, {"token", s.token}, {"next", s.next}, {"kl", s.kl},
                   {"top1_full", s.top1_full}, {"top1_compressed", s.top1_compressed},
                   {"attention_mass", s.attention_mass}});
  }
  return out;
}

json outputErrorJson(const at::Tensor& error) {  // [layers, heads]
  json out = json::array();
  for (int64_t l = 0; error.defined() && l < error.size(0); ++l) {
    json heads = json::array();
    for (int64_t h = 0; h < error.size(1); ++h) heads.push_back(error[l][h].item<double>());
    out.push_back(heads);
  }
  return out;
}

// The numbers the sweep table and the summary share.
json headline(const CompressionResult& r) {
  return {{"kl_mean", r.kl_mean},
          {"kl_max", r.kl_max},
          {"top1_agreement", r.top1_agreement},
          {"attention_mass", r.attention_mass},
          {"perplexity_full", r.perplexity_full},
          {"perplexity_compressed", r.perplexity_compressed},
          {"bytes_full", r.bytes_full},
          {"bytes_kept", r.bytes_kept}};
}

}  // namespace

std::string describeSpec(const CompressionSpec& spec) {
  std::string text;
  if (spec.eviction) {
    text += std::string(evictionPolicyName(spec.eviction->policy)) + " budget " + budgetText(spec.eviction->budget);
    if (spec.eviction->demote_bits > 0) text += ", the rest as int" + std::to_string(spec.eviction->demote_bits);
  }
  if (spec.pruning) {
    const PruneSettings& p = *spec.pruning;
    text += (text.empty() ? "" : ", ") + std::string(pruneAxisName(p.axis)) + " " + elementScoreName(p.score) + " K " +
            percent(p.k_sparsity) + " V " + percent(p.v_sparsity) + " (dense window " + std::to_string(p.dense_window) + ")";
  }
  return text.empty() ? "no compression" : text;
}

json compressionJson(const CompressionSpec& spec, const CompressionResult& r) {
  json j = headline(r);
  j["spec"] = specJson(spec);
  j["kept"] = r.kept;
  j["layer_budgets"] = r.layer_budgets;
  j["removed"] = removedJson(r.removed);
  j["scores"] = json::array();  // [layer][kv head][row], the eviction policy's score of every prefill row
  for (const at::Tensor& layer : r.scores) {
    json heads = json::array();
    for (int64_t h = 0; h < layer.size(0); ++h) {
      const auto row = layer[h].to(torch::kFloat64).contiguous();
      heads.push_back(std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel()));
    }
    j["scores"].push_back(heads);
  }
  j["demoted"] = r.demoted;
  j["demote_max_error"] = r.demote_max_error;
  j["pruned_k"] = r.pruned_k;
  j["pruned_v"] = r.pruned_v;
  j["prefill_rows"] = r.prefill_rows;
  j["steps"] = stepsJson(r.steps);
  j["attention_output_error"] = outputErrorJson(r.output_error);
  return j;
}

void printCompression(std::ostream& out, const CompressionSpec& spec, const CompressionResult& r) {
  out << "compression: " << describeSpec(spec) << ", prefill of " << r.prefill_rows << " rows\n";
  for (size_t l = 0; l < r.kept.size(); ++l) {
    out << "  layer " << l << " kept rows per kv head:";
    for (const auto& head : r.kept[l]) out << " " << head.size();
    out << "\n";
  }
  if (r.demoted > 0) out << "  demoted " << r.demoted << " rows instead of evicting them (max error " << format("%.5f", r.demote_max_error) << ")\n";
  out << "  evicted " << static_cast<int64_t>(r.removed.size()) - r.demoted << " rows, zeroed " << r.pruned_k << " K and " << r.pruned_v << " V entries\n";
  out << "  bytes kept " << r.bytes_kept << " of " << r.bytes_full << " (" << percent(r.bytes_full > 0 ? double(r.bytes_kept) / double(r.bytes_full) : 1) << ")\n";
  out << "step  pos  token  KL(full||comp)  top1 full/comp  attn mass\n";
  for (const CompressionStep& s : r.steps) {
    out << std::setw(4) << &s - r.steps.data() << std::setw(5) << s.position << std::setw(7) << s.token
        << std::setw(16) << format("%.6f", s.kl) << std::setw(8) << s.top1_full << "/" << std::left << std::setw(7)
        << s.top1_compressed << std::right << std::setw(9) << format("%.4f", s.attention_mass) << "\n";
  }
  if (r.output_error.defined() && !r.steps.empty()) {
    out << "attention output error |o_comp - o_full| / |o_full|, mean over steps and heads, per layer:";
    for (int64_t l = 0; l < r.output_error.size(0); ++l) out << " " << format("%.4f", r.output_error[l].mean().item<double>());
    out << "\n";
  }
  out << "KL mean " << format("%.6f", r.kl_mean) << ", max " << format("%.6f", r.kl_max) << "; top-1 agreement "
      << percent(r.top1_agreement) << "; attention mass " << format("%.4f", r.attention_mass) << "; perplexity full "
      << format("%.3f", r.perplexity_full) << ", compressed " << format("%.3f", r.perplexity_compressed) << "\n";
}

json sweepJson(const std::vector<SweepRow>& eviction, const std::vector<SweepRow>& pruning) {
  auto table = [](const std::vector<SweepRow>& rows) {
    json entries = json::array();
    for (const SweepRow& row : rows) {
      json entry = headline(row.result);
      entry.update(specJson(row.spec));
      entries.push_back(entry);
    }
    return entries;
  };
  return {{"eviction", table(eviction)}, {"pruning", table(pruning)}};
}

void printSweep(std::ostream& out, const std::vector<SweepRow>& eviction, const std::vector<SweepRow>& pruning) {
  auto line = [&](const std::string& label, const CompressionResult& r) {
    out << "| " << std::left << std::setw(34) << label << std::right << " | " << format("%8.4f", r.kl_mean) << " | "
        << format("%8.4f", r.kl_max) << " | " << std::setw(5) << percent(r.top1_agreement) << " | "
        << format("%9.4f", r.attention_mass) << " | " << std::setw(10)
        << percent(r.bytes_full > 0 ? double(r.bytes_kept) / double(r.bytes_full) : 1) << " |\n";
  };
  const std::string header =
      "| setting                            |  KL mean |   KL max | top-1 | attn mass | bytes kept |\n"
      "|------------------------------------|---------:|---------:|------:|----------:|-----------:|\n";
  out << "Token eviction (prefill compression, KL(p_full || p_compressed) in nats per step):\n\n" << header;
  for (const SweepRow& row : eviction) line(describeSpec(row.spec), row.result);
  out << "\nElement pruning (K and V at the same sparsity, dense window "
      << (pruning.empty() ? 0 : pruning.front().spec.pruning->dense_window) << "):\n\n" << header;
  for (const SweepRow& row : pruning) {
    const PruneSettings& p = *row.spec.pruning;
    line(std::string(pruneAxisName(p.axis)) + " " + elementScoreName(p.score) + " " + percent(p.k_sparsity), row.result);
  }
}

json speculationJson(const SpeculationRow& row) {
  const SelfSpeculationResult& r = row.result;
  return {{"drafter", row.label},     {"alpha", r.alpha},
          {"rounds", r.rounds},       {"drafted", r.drafted},
          {"accepted", r.accepted},   {"tokens", r.tokens},
          {"seconds", row.seconds},   {"baseline_seconds", row.baseline_seconds},
          {"draft_rows", r.draft_rows}, {"full_rows", r.full_rows},
          {"draft_seconds", r.draft_seconds}, {"verify_seconds", r.verify_seconds},
          {"speedup", row.seconds > 0 ? row.baseline_seconds / row.seconds : 0.0}};
}

void printSpeculation(std::ostream& out, int64_t gamma, const std::vector<SpeculationRow>& rows) {
  out << "\nCompressed-cache self-speculation (greedy, gamma " << gamma
      << "; verification over the full cache, so the output is the target's):\n\n"
      << "| drafter                            | alpha | tokens / verify | measured speedup | rows a draft reads |\n"
      << "|------------------------------------|------:|----------------:|-----------------:|-------------------:|\n";
  for (const SpeculationRow& row : rows) {
    const SelfSpeculationResult& r = row.result;
    const double per_verify = r.rounds > 0 ? double(r.accepted + r.rounds) / double(r.rounds) : 0;
    out << "| " << std::left << std::setw(34) << row.label << std::right << " | " << format("%5.2f", r.alpha) << " | "
        << format("%15.2f", per_verify) << " | " << format("%15.2fx", row.seconds > 0 ? row.baseline_seconds / row.seconds : 0)
        << " | " << std::setw(18) << std::to_string(r.draft_rows) + " of " + std::to_string(r.full_rows) << " |\n";
  }
}

}  // namespace kvscope::cli
