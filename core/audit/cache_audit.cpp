#include "core/audit/cache_audit.h"

#include "core/audit/row_identity.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/probe_recorder.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Entries of `cache` written after its first policy eviction, up to `moment`:
// in layers > 0 their K/V come from attention over the compressed cache.
std::set<int64_t> writtenAfterEviction(const SessionRecord& record, CacheRole cache, const Moment& moment) {
  std::set<int64_t> written;
  bool evicted = false;
  const auto& events = record.events.events();
  for (size_t i = 0; i < record.events.countAtOrBefore(moment); ++i) {
    const CacheEvent& e = events[i];
    if (e.cache != cache) continue;
    if (evicted) written.insert(e.written.begin(), e.written.end());
    evicted = evicted || e.masksRows();
  }
  return written;
}

// Fills max |dK|, |dV| of the verdicts comparable with a recomputation and
// turns ok rows with wrong numbers into WrongValues. fresh_k/v: [kv_heads, E, D].
// Returns how many rows were not comparable (in `not_comparable`, layers > 0).
int64_t compareValues(const SessionRecord& record, std::vector<RowVerdict>& verdicts, int64_t layer,
                      const at::Tensor& fresh_k, const at::Tensor& fresh_v, const AuditTolerance& tol,
                      const std::set<int64_t>& not_comparable) {
  std::vector<int64_t> entries, positions;
  std::vector<size_t> which;
  int64_t skipped = 0;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const RowVerdict& v = verdicts[i];
    if (v.entry < 0 || v.position < 0 || v.position >= fresh_k.size(1)) continue;
    if (v.state == RowState::Stale) continue;
    if (layer > 0 && not_comparable.count(v.entry) > 0) {
      ++skipped;
      continue;
    }
    entries.push_back(v.entry);
    positions.push_back(v.position);
    which.push_back(i);
  }
  if (entries.empty()) return skipped;
  const auto cached_k = record.ledger.stackKeys(entries)[layer];  // [kv_heads, R, D]
  const auto cached_v = record.ledger.stackValues(entries)[layer];
  const auto index = torch::tensor(positions, torch::kInt64);
  const auto want_k = fresh_k.index_select(1, index), want_v = fresh_v.index_select(1, index);  // [kv_heads, R, D]
  const auto dk = (cached_k - want_k).abs().amax(-1).contiguous();  // [kv_heads, R]
  const auto dv = (cached_v - want_v).abs().amax(-1).contiguous();
  const auto scale = torch::maximum(want_k.abs().amax(-1), want_v.abs().amax(-1));
  const auto bad = (torch::maximum(dk, dv) > (tol.absolute + tol.relative * scale)).any(0).contiguous();  // [R]
  const auto worst = torch::maximum(dk, dv).argmax(0).contiguous();  // [R]
  const auto dk_max = dk.amax(0).contiguous(), dv_max = dv.amax(0).contiguous();
  for (size_t j = 0; j < which.size(); ++j) {
    RowVerdict& v = verdicts[which[j]];
    const auto jj = static_cast<int64_t>(j);
    v.max_abs_dk = dk_max[jj].item<double>();
    v.max_abs_dv = dv_max[jj].item<double>();
    v.worst_head = worst[jj].item<int64_t>();
    if (v.state == RowState::Ok && bad[jj].item<bool>()) v.state = RowState::WrongValues;
  }
  return skipped;
}

// The block table's state after the cache's last operation at or before
// `moment` (each event records it; a contiguous cache's are empty).
std::vector<DanglingBlock> danglingBlocksAt(const SessionRecord& record, CacheRole cache, const Moment& moment) {
  std::vector<DanglingBlock> dangling;
  for (const CacheEvent& e : record.events.events()) {
    if (e.cache != cache) continue;
    if (!atOrBefore(e.moment(), moment)) break;
    dangling = e.dangling_blocks;
  }
  return dangling;
}

}  // namespace

CacheAudit auditAt(const SessionRecord& record, CacheRole cache, const Moment& moment, const CausalLM* model,
                   const AuditTolerance& tolerance) {
  CacheAudit audit;
  audit.cache = cache;
  audit.moment = moment;
  const int64_t layers = record.layers(cache);
  const CacheLayout layout = record.events.layoutAt(cache, layers, moment);
  const std::vector<int64_t> stream = record.streamOfRound(moment.round);
  audit.expected_rows = std::min<int64_t>(record.events.expectedRowsAt(cache, moment), stream.size());
  ProbeRecorder fresh({Probe::Key, Probe::Value});  // per layer [kv_heads, n, head_dim]
  const std::set<int64_t> after_eviction = writtenAfterEviction(record, cache, moment);
  if (model != nullptr && audit.expected_rows > 0) {
    c10::InferenceMode guard;
    const std::vector<int64_t> expected(stream.begin(), stream.begin() + audit.expected_rows);
    model->forward(idsTensor(expected), 0, nullptr, &fresh, /*logit_rows=*/0);  // K/V are what it is for
    audit.values_checked = true;
  }
  for (int64_t layer = 0; layer < layers; ++layer) {
    const auto& rows = layout.layers[static_cast<size_t>(layer)];
    audit.rows_per_layer.push_back(static_cast<int64_t>(rows.size()));
    RowContract contract = record.events.contractAt(cache, layer, moment);
    contract.end = audit.expected_rows;
    if (contract.first > 0) {
      audit.expected_first.resize(static_cast<size_t>(layers), 0);
      audit.expected_first[static_cast<size_t>(layer)] = contract.first;
    }
    std::vector<RowVerdict> verdicts = classifyRows(record.ledger.entries(), cache, layer, rows, contract, stream);
    if (audit.values_checked) {
      audit.not_comparable_after_eviction +=
          compareValues(record, verdicts, layer, fresh.get(Probe::Key, layer), fresh.get(Probe::Value, layer), tolerance,
                        after_eviction);
    }
    std::vector<double> error(rows.size(), audit.values_checked ? kInf : std::nan(""));
    for (const RowVerdict& v : verdicts) {
      if (v.entry >= 0 && v.max_abs_dk) {
        const double e = std::max(*v.max_abs_dk, *v.max_abs_dv);
        audit.max_value_error = std::max(audit.max_value_error, e);
        if (v.state == RowState::Ok || v.state == RowState::WrongValues) error[static_cast<size_t>(v.row)] = e;
      } else if (v.state == RowState::Ok && v.row >= 0 && v.row < static_cast<int64_t>(error.size())) {
        error[static_cast<size_t>(v.row)] = std::nan("");  // an ok row not compared (written after an eviction)
      }
      if (v.state == RowState::Ok) {
        ++audit.ok_rows;
      } else if (v.state == RowState::Padding) {
        ++audit.padding_rows;
        error[static_cast<size_t>(v.row)] = std::nan("");  // a pad row has no recomputation to compare with
      } else {
        audit.rows.push_back(v);
      }
    }
    audit.error.push_back(std::move(error));
  }
  std::stable_sort(audit.rows.begin(), audit.rows.end(), [](const RowVerdict& a, const RowVerdict& b) {
    return std::make_pair(a.row, a.layer) < std::make_pair(b.row, b.layer);
  });
  audit.dangling_blocks = danglingBlocksAt(record, cache, moment);
  return audit;
}

}  // namespace kvscope
