#include "core/check/capture_writer.h"

#include <torch/types.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "core/capture/capture_change.h"
#include "core/check/capture_models.h"

namespace kvscope {
namespace {

using namespace capture_writing;

class Writer {
 public:
  Writer(const SessionRecord& record, const CaptureModelSource& target, const CaptureModelSource& drafter)
      : record_(record), sources_{target, drafter} {}

  void write(const std::string& path, const std::string& engine) {
    refuseWhatACaptureCannotHold(record_, sources_[0], sources_[1]);
    for (int r = 0; r < 2; ++r) {
      const int64_t layers = record_.layers(r == 0 ? CacheRole::Target : CacheRole::Drafter);
      rows_.emplace_back(layers);
      layouts_[r].layers.resize(static_cast<size_t>(layers));
    }
    for (const CacheEvent& e : record_.events.events()) addEvent(e);
    Json models = Json::object();
    for (int r = 0; r < 2; ++r) {
      if (!sources_[r].model) continue;
      const auto role = r == 0 ? CaptureRole::Target : CaptureRole::Drafter;
      models[r == 0 ? "target" : "drafter"] =
          modelOf(describeCaptureModel(role, sources_[r].name_or_path, *sources_[r].model), calls_[r]);
      addRowTensors(r);
    }
    const Json manifest = {{"format", "kvscope-capture"}, {"version", 1},
                           {"engine", {{"name", engine}, {"recorder", "kvscope-cli run --capture"}}},
                           {"complete", true},           {"logits", {{"mode", "full"}}},
                           {"models", models},           {"calls", calls_json_},
                           {"committed", record_.sequence}};
    writeCaptureFile(path, stored_, 1, manifest);
  }

 private:

  void addEvent(const CacheEvent& e) {
    const int r = e.cache == CacheRole::Target ? 0 : 1;
    if (e.kind != CacheEventKind::Append && e.kind != CacheEventKind::Refeed) {
      applyEvent(layouts_[r], e);  // between calls: seen in the next call's before state
      last_between_[r] = e.moment();
      return;
    }
    const auto before = idsOf(layouts_[r], rows_[r]);
    applyEvent(layouts_[r], e);
    const auto after = idsOf(layouts_[r], rows_[r]);
    addCall(r, e, before, after);
  }

  void addCall(int r, const CacheEvent& e, const std::vector<std::vector<int64_t>>& before,
               const std::vector<std::vector<int64_t>>& after) {
    const auto [ids, positions] = fedInputs(record_, e);
    if (ids.empty()) return;  // a forward that wrote nothing leaves no call to check
    const int64_t index = calls_[r]++;
    Json call = {{"role", roleName(e.cache)}, {"index", index}, {"input_ids", ids}, {"positions", positions},
                 {"positions_source", "position_ids"}, {"cache_position", nullptr}, {"attention_mask", nullptr},
                 {"before", stateOf(before)}, {"between", nullptr}, {"after", stateOf(after)}, {"logits", nullptr}};
    if (index > 0) {
      call["between"] = {{"kind", captureBetweenKindName(deriveStateChange(last_after_[r], before))},
                         {"layers", Json::array()}, {"what", ""}};
    }
    last_after_[r] = after;
    // kvscope's own moments, for tests that compare check with diff (readers ignore unknown keys).
    call["kvscope"] = {{"round", e.round}, {"phase", phaseName(e.phase)}};
    if (last_between_[r]) {
      call["kvscope"]["between_round"] = last_between_[r]->round;
      call["kvscope"]["between_phase"] = phaseName(last_between_[r]->phase);
      last_between_[r].reset();
    }
    if (e.cache == CacheRole::Target && e.phase == Phase::Verify) addVerifyLogits(call, e.round, index, ids.size());
    calls_json_.push_back(std::move(call));
  }

  void addVerifyLogits(Json& call, int64_t round, int64_t index, size_t inputs) {
    const auto it = record_.verify.find(round);
    if (it == record_.verify.end() || !it->second.logits.defined() || it->second.logits_dropped) return;
    const at::Tensor logits = it->second.logits.to(torch::kFloat32).contiguous();  // [rows, vocab]
    if (logits.dim() != 2 || logits.size(0) > static_cast<int64_t>(inputs)) return;
    const std::string name = "target.call" + std::to_string(index) + ".logits";
    stored_.emplace_back(name, logits);
    call["logits"] = {{"rows", logits.size(0)}, {"tensors", {{"logits", name}}}};
  }

  void addRowTensors(int r) {
    storeRowTensors(rows_[r], r == 0 ? "target" : "drafter", sources_[r].model->config(), {&record_}, stored_);
  }

  const SessionRecord& record_;
  CaptureModelSource sources_[2];
  std::vector<RowIds> rows_;
  CacheLayout layouts_[2];
  std::vector<std::vector<int64_t>> last_after_[2];
  std::optional<Moment> last_between_[2];  // the last change between calls since the role's previous call
  int64_t calls_[2] = {0, 0};
  Json calls_json_ = Json::array();
  std::vector<std::pair<std::string, at::Tensor>> stored_;  // float32, contiguous
};

}  // namespace

void writeSessionCapture(const std::string& path, const SessionRecord& record, const CaptureModelSource& target,
                         const CaptureModelSource& drafter, const std::string& engine) {
  Writer(record, target, drafter).write(path, engine);
}

}  // namespace kvscope
