#include "app/cli/explain_printer.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace kvscope::cli {
namespace {

std::vector<float> floats(const at::Tensor& t) {  // t: [n]
  const auto c = t.to(torch::kFloat32).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

std::vector<std::vector<float>> rows(const at::Tensor& t) {  // t: [rows, n]
  std::vector<std::vector<float>> out;
  for (int64_t r = 0; r < t.size(0); ++r) out.push_back(floats(t[r]));
  return out;
}

// -inf (a hidden key) as null: JSON has no infinity.
nlohmann::json finiteOrNull(const at::Tensor& t) {
  nlohmann::json out = nlohmann::json::array();
  for (float x : floats(t)) out.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
  return out;
}

std::vector<bool> bools(const at::Tensor& t) {  // t: [n] bool
  std::vector<bool> out;
  const auto c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(c[i].item<bool>());
  return out;
}

std::string quoted(const Tokenizer& tokenizer, int64_t id) {
  std::string text;
  for (char c : tokenizer.tokenText(id)) text += c == '\n' ? std::string("\\n") : std::string(1, c);
  return "'" + text + "'";
}

std::vector<std::string> tokenTexts(const ExplainContext& context, int64_t count) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(context.tokenizer.tokenText(context.ids[i]));
  return out;
}

nlohmann::json rotaryJson(const AttentionSteps& steps) {
  if (!steps.rotary) return nullptr;
  const int64_t half = steps.q.size(0) / 2;
  return {{"pairs", "channel i turns with channel i + " + std::to_string(half)},
          {"angle", floats(steps.rotary->angle)},
          {"theta", floats(steps.rotary->theta)},
          {"magnitude", steps.rotary->magnitude}};
}

std::string vectorText(const at::Tensor& t, int per_line = 8) {  // t: [n]
  std::ostringstream out;
  out << std::fixed << std::setprecision(4);
  const auto values = floats(t);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out << (i % per_line == 0 ? "\n      " : " ");
    out << std::setw(8) << values[i];
  }
  return out.str();
}

// A table cell: fixed decimals, or "-inf" for a hidden key.
std::string cell(double x, int decimals = 4) {
  if (!std::isfinite(x)) return "-inf";
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << x;
  return out.str();
}

std::string headList(const std::vector<int64_t>& heads) {
  std::string out;
  for (size_t i = 0; i < heads.size(); ++i) out += (i ? " " : "") + std::to_string(heads[i]);
  return out;
}

std::string listText(const std::vector<int64_t>& values, const std::string& none) {
  return values.empty() ? none : headList(values);
}

void printVectors(std::ostream& out, const AttentionSteps& steps) {
  const int64_t P = steps.query.position, G = steps.kv_head;
  out << "2. q of head " << steps.query.head << (steps.rotary ? ", before the rotary embedding" : "") << " ["
      << steps.q.size(0) << "]:\n      " << vectorText(steps.q_before_rope) << "\n";
  if (!steps.rotary) {
    out << "   no rotary embedding: GPT-2 adds learned position embeddings to the input instead\n";
  } else {
    out << "   rotary at position " << P << ": channel i turns with channel i + " << steps.q.size(0) / 2
        << " by " << P << " x theta_i radians";
    if (steps.rotary->magnitude != 1.0) out << " (longrope: cos/sin scaled by " << steps.rotary->magnitude << ")";
    out << ":\n      "
        << vectorText(steps.rotary->angle) << "\n   q after the rotary embedding:\n      " << vectorText(steps.q)
        << "\n   k of this token (kv head " << G << ") before the rotary embedding:\n      "
        << vectorText(steps.keys_before_rope[P]) << "\n";
  }
  out << "   k of this token (kv head " << G << ")" << (steps.rotary ? " after the rotary embedding" : "") << ":\n      "
      << vectorText(steps.keys[P]) << "\n   v of this token (kv head " << G << "):\n      "
      << vectorText(steps.values[P]) << "\n";
}

// "0.176777 = 1/sqrt(32), head_dim": which root the scale is, and whether
// it is the default one.
std::string scaleText(const AttentionSteps& steps) {
  const double root = 1.0 / (steps.scale * steps.scale);
  std::ostringstream out;
  out << std::setprecision(6) << steps.scale << " = 1/sqrt(" << std::setprecision(6) << root << ")";
  if (std::abs(root - static_cast<double>(steps.q.size(0))) < 1e-6) out << ", head_dim";
  return out.str();
}

void printScoreTable(std::ostream& out, const ExplainContext& context, const AttentionSteps& steps) {
  const int64_t T = steps.query.position + 1;
  out << "3. q . k against the " << T << " keys of positions 0-" << T - 1 << " (kv head " << steps.kv_head
      << "), times the scale " << scaleText(steps);
  if (steps.softcap > 0) out << ", soft-capped: " << steps.softcap << " tanh(x / " << steps.softcap << ")";
  if (steps.window > 0) out << ", sliding window " << steps.window;
  out << ", masked, softmax:\n   " << std::setw(5) << "pos" << "  " << std::left << std::setw(14) << "token"
      << std::right << std::setw(10) << "q.k" << std::setw(10) << "scaled";
  if (steps.softcap > 0) out << std::setw(10) << "capped";
  out << std::setw(10) << "masked" << std::setw(10) << "weight" << "\n";
  const auto scores = floats(steps.scores), scaled = floats(steps.scaled), capped = floats(steps.capped);
  const auto masked = floats(steps.masked), weights = floats(steps.weights);
  for (int64_t j = 0; j < T; ++j) {
    out << "   " << std::setw(5) << j << "  " << std::left << std::setw(14) << quoted(context.tokenizer, context.ids[j])
        << std::right << std::setw(10) << cell(scores[j]) << std::setw(10) << cell(scaled[j]);
    if (steps.softcap > 0) out << std::setw(10) << cell(capped[j]);
    out << std::setw(10) << cell(masked[j]) << std::setw(10) << cell(weights[j], 6) << "\n";
  }
}

}  // namespace

nlohmann::json explainJson(const ExplainContext& context, const AttentionSteps& steps) {
  const int64_t P = steps.query.position;
  const ElementScores element = elementScores(steps);
  return {{"layer", steps.query.layer},
          {"head", steps.query.head},
          {"position", P},
          {"token_ids", std::vector<int64_t>(context.ids.begin(), context.ids.begin() + P + 1)},
          {"tokens", tokenTexts(context, P + 1)},
          {"kv_head", steps.kv_head},
          {"query_heads_sharing", steps.query_heads_sharing},
          {"hidden", floats(steps.hidden)},
          {"q_before_rope", floats(steps.q_before_rope)},
          {"rotary", rotaryJson(steps)},
          {"q", floats(steps.q)},
          {"k_before_rope", rows(steps.keys_before_rope)},
          {"k", rows(steps.keys)},
          {"v", rows(steps.values)},
          {"scores", floats(steps.scores)},
          {"scale", steps.scale},
          {"scaled", floats(steps.scaled)},
          {"softcap", steps.softcap > 0 ? nlohmann::json(steps.softcap) : nlohmann::json(nullptr)},
          {"capped", floats(steps.capped)},
          {"window", steps.window > 0 ? nlohmann::json(steps.window) : nlohmann::json(nullptr)},
          {"visible", bools(steps.visible)},
          {"masked", finiteOrNull(steps.masked)},
          {"weights", floats(steps.weights)},
          {"output", floats(steps.output)},
          {"element_scores", {{"k", rows(element.keys)}, {"v", rows(element.values)}}},
          {"model_difference", steps.model_difference},
          {"o_proj_head_contribution", floats(steps.head_contribution)},
          {"o_proj_bias", floats(steps.o_proj_bias)},
          {"attention_output_after_o_proj", floats(steps.projected)},
          {"o_proj_difference", steps.projection_difference}};
}

nlohmann::json whatIfJson(const ExplainContext& context, const CacheEdit& edit, const WhatIf& result) {
  auto top1 = [&](int64_t id) {
    return nlohmann::json{{"id", id},
                          {"token", context.tokenizer.tokenText(id)},
                          {"p_before", result.probabilities_before[id].item<double>()},
                          {"p_after", result.probabilities_after[id].item<double>()}};
  };
  return {{"removed_positions", edit.remove_positions},
          {"zero_k_channels", edit.zero_key_channels},
          {"zero_v_channels", edit.zero_value_channels},
          {"zero_rows", edit.zero_positions},
          {"kv_head", result.kv_head},
          {"removed", bools(result.removed)},
          {"weights_before", floats(result.weights_before)},
          {"weights_after", floats(result.weights_after)},
          {"output_before", floats(result.output_before)},
          {"output_after", floats(result.output_after)},
          {"kl", result.kl},
          {"top1_before", top1(result.top1_before)},
          {"top1_after", top1(result.top1_after)},
          {"max_logit_difference", result.max_logit_difference}};
}

void printExplanation(std::ostream& out, const ExplainContext& context, const AttentionSteps& steps) {
  const int64_t P = steps.query.position;
  out << "explain: " << context.config.architecture_name << ", layer " << steps.query.layer << ", head "
      << steps.query.head << ", query position " << P << " " << quoted(context.tokenizer, context.ids[P]) << " (id "
      << context.ids[P] << ") of a " << context.ids.size() << "-token prefill without cache\n"
      << "   head " << steps.query.head << " reads kv head " << steps.kv_head << "; query heads sharing it: "
      << headList(steps.query_heads_sharing) << "\n";
  const double norm = steps.hidden.norm().item<double>();
  out << "1. hidden state entering layer " << steps.query.layer << " after its norm [" << steps.hidden.size(0)
      << "], |x| = " << std::setprecision(4) << norm << ", first channels:\n      "
      << vectorText(steps.hidden.narrow(0, 0, std::min<int64_t>(8, steps.hidden.size(0)))) << "\n";
  printVectors(out, steps);
  printScoreTable(out, context, steps);
  out << "4. output = sum_j weight_j v_j, before o_proj [" << steps.output.size(0) << "]:\n      "
      << vectorText(steps.output) << "\n"
      << "these steps match the model's own forward (attention weights and output): max |difference| "
      << std::scientific << std::setprecision(2) << steps.model_difference << std::defaultfloat << "\n";
  const int64_t hidden = steps.head_contribution.size(0), shown = std::min<int64_t>(8, hidden);
  const int64_t H = steps.query.head, D = steps.output.size(0);
  out << "5. through o_proj: head " << H << "'s output times its slice of o_proj (columns " << H * D << "-"
      << (H + 1) * D - 1 << ", [" << hidden << " x " << D << "]) -> its share of the layer's attention output ["
      << hidden << "], |share| = " << std::setprecision(4) << steps.head_contribution.norm().item<double>()
      << ", first channels:\n      " << vectorText(steps.head_contribution.narrow(0, 0, shown))
      << "\n   the layer's attention output after o_proj (all " << context.config.num_heads << " heads' shares"
      << (steps.o_proj_bias.abs().max().item<double>() > 0 ? " + bias" : ", no bias") << "), |out| = "
      << steps.projected.norm().item<double>() << ", first channels:\n      "
      << vectorText(steps.projected.narrow(0, 0, shown)) << "\n"
      << "   matches the model's own forward after o_proj: max |difference| " << std::scientific
      << std::setprecision(2) << steps.projection_difference << std::defaultfloat << "\n";
}

void printWhatIf(std::ostream& out, const ExplainContext& context, const CacheEdit& edit, const WhatIf& result) {
  const int64_t P = result.query.position;
  out << "what if: layer " << result.query.layer << " rows removed: " << listText(edit.remove_positions, "none")
      << "; K channels zeroed: " << listText(edit.zero_key_channels, "none")
      << "; V channels zeroed: " << listText(edit.zero_value_channels, "none");
  if (!edit.zero_key_channels.empty() || !edit.zero_value_channels.empty()) {
    out << " (kv head " << result.kv_head << ", rows " << listText(edit.zero_positions, "0-" + std::to_string(P - 1)) << ")";
  }
  out << "\n   " << std::setw(5) << "pos" << "  " << std::left << std::setw(14) << "token" << std::right
      << std::setw(10) << "before" << std::setw(10) << "after" << "\n";
  const auto before = floats(result.weights_before), after = floats(result.weights_after);
  const auto removed = bools(result.removed);
  for (int64_t j = 0; j <= P; ++j) {
    out << "   " << std::setw(5) << j << "  " << std::left << std::setw(14) << quoted(context.tokenizer, context.ids[j])
        << std::right << std::setw(10) << cell(before[j], 6) << std::setw(10) << cell(after[j], 6)
        << (removed[j] ? "  removed" : "")
        << "\n";
  }
  const double output_change = (result.output_after - result.output_before).abs().max().item<double>();
  const auto& t = context.tokenizer;
  out << std::fixed << std::setprecision(4) << "   head output: max |change| " << output_change << "\n   next token at position " << P << ": top-1 "
      << quoted(t, result.top1_before) << " (p " << result.probabilities_before[result.top1_before].item<double>()
      << ") -> " << quoted(t, result.top1_after) << " (p "
      << result.probabilities_after[result.top1_after].item<double>() << "); KL(before || after) = "
      << std::scientific << std::setprecision(3) << result.kl << " nats; max |delta logit| " << std::fixed
      << std::setprecision(4) << result.max_logit_difference << std::defaultfloat << "\n";
}

}  // namespace kvscope::cli
