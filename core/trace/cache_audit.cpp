#include "core/trace/cache_audit.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/model/scoring.h"

namespace kvscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Collects the fresh K and V rows of every layer from an uncached forward.
class KeyValueRecorder : public ProbeSink {
 public:
  explicit KeyValueRecorder(int64_t layers) : keys(layers), values(layers) {}
  bool wants(Probe probe, int64_t) const override { return probe == Probe::Key || probe == Probe::Value; }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override {
    (probe == Probe::Key ? keys : values)[layer] = value.to(torch::kFloat32);
  }
  std::vector<at::Tensor> keys, values;  // per layer [kv_heads, n, head_dim]
};

// Keeps the smallest (position, layer, head) bad cell.
void consider(std::optional<AuditCell>& first, const AuditCell& cell) {
  auto key = [](const AuditCell& c) { return std::make_tuple(c.position, c.layer, c.head); };
  if (!first || key(cell) < key(*first)) first = cell;
}

}  // namespace

AuditReport auditCache(const CausalLM& model, const KvCache& cache, const std::vector<int64_t>& expected_tokens,
                       CacheRole role, int64_t round, const AuditTolerance& tolerance) {
  c10::InferenceMode guard;
  AuditReport report;
  report.cache = role;
  report.round = round;
  const int64_t expected = static_cast<int64_t>(expected_tokens.size());
  report.expected_length = expected;
  const int64_t layers = cache.numLayers();
  KeyValueRecorder fresh(layers);
  if (expected > 0) model.forward(idsTensor(expected_tokens), 0, nullptr, &fresh);

  for (int64_t layer = 0; layer < layers; ++layer) {
    const int64_t rows = cache.length(layer);
    report.physical_lengths.push_back(rows);
    std::vector<double> per_position(std::max(rows, expected), kInf);
    const int64_t common = std::min(rows, expected);
    if (common > 0) {
      auto cached_k = cache.keys(layer).narrow(1, 0, common).to(torch::kFloat32);  // [kv_heads, common, head_dim]
      auto cached_v = cache.values(layer).narrow(1, 0, common).to(torch::kFloat32);
      auto fresh_k = fresh.keys[layer].narrow(1, 0, common);
      auto fresh_v = fresh.values[layer].narrow(1, 0, common);
      auto error = torch::maximum((cached_k - fresh_k).abs().amax(-1), (cached_v - fresh_v).abs().amax(-1));  // [h, common]
      auto scale = torch::maximum(fresh_k.abs().amax(-1), fresh_v.abs().amax(-1));                          // [h, common]
      auto bad = error > (tolerance.absolute + tolerance.relative * scale);
      auto error_by_position = error.amax(0).contiguous();  // [common]
      for (int64_t p = 0; p < common; ++p) per_position[p] = error_by_position[p].item<double>();
      report.max_value_error = std::max(report.max_value_error, error.max().item<double>());
      auto bad_cells = bad.nonzero();  // [count, 2]: head, position
      report.bad_cells += bad_cells.size(0);
      for (int64_t i = 0; i < bad_cells.size(0); ++i) {
        const int64_t head = bad_cells[i][0].item<int64_t>(), position = bad_cells[i][1].item<int64_t>();
        consider(report.first_bad, {round, layer, head, position, error[head][position].item<double>(), "value"});
      }
    }
    for (int64_t p = common; p < std::max(rows, expected); ++p) {
      report.bad_cells += cache.kvHeads();
      consider(report.first_bad, {round, layer, 0, p, kInf, rows > expected ? "extra" : "missing"});
    }
    report.error.push_back(std::move(per_position));
  }
  return report;
}

nlohmann::json toJson(const AuditReport& r, bool include_matrix) {
  nlohmann::json j = {{"cache", cacheRoleName(r.cache)},
                      {"round", r.round},
                      {"expected_length", r.expected_length},
                      {"physical_lengths", r.physical_lengths},
                      {"clean", r.clean()},
                      {"bad_cells", r.bad_cells},
                      {"max_value_error", r.max_value_error}};
  if (r.first_bad) {
    const AuditCell& c = *r.first_bad;
    j["first_bad"] = {{"round", c.round}, {"layer", c.layer}, {"head", c.head}, {"position", c.position},
                      {"kind", c.kind}, {"error", std::isinf(c.error) ? nlohmann::json(nullptr) : nlohmann::json(c.error)}};
  } else {
    j["first_bad"] = nullptr;
  }
  if (include_matrix) {
    nlohmann::json matrix = nlohmann::json::array();  // null = missing or extra row
    for (const auto& layer : r.error) {
      nlohmann::json row = nlohmann::json::array();
      for (double e : layer) row.push_back(std::isinf(e) ? nlohmann::json(nullptr) : nlohmann::json(e));
      matrix.push_back(row);
    }
    j["error"] = matrix;
  }
  return j;
}

}  // namespace kvscope
