#include "core/check/capture_check.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/check/capture_rules.h"
#include "core/check/reference_streams.h"
#include "core/error.h"
#include "core/model/scoring.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope {
namespace {

// The first call whose logits differ from the reference's: the symptom a
// user sees, reported beside the root cause (which may explain it).
class Symptom {
 public:
  Symptom(const CaptureFile& file, const CaptureTimeline& timeline, CaptureReferences& references, const TokenText& text)
      : file_(file), timeline_(timeline), references_(references), text_(text) {
    for (int r = 0; r < kCaptureRoles; ++r) {
      if (file.manifest().models[r]) {
        log_probability_[r] = logProbabilityTolerance(file.rows(static_cast<CaptureRole>(r), 0, CaptureKV::Keys).dtype());
      }
    }
  }

  int64_t logitRowsChecked() const { return logit_rows_checked_; }
  std::vector<CaptureLogitRow> takeAgreeingRows() { return std::move(agreeing_); }

  at::Tensor floatTensor(const std::string& name) const {
    const CaptureTensor t = file_.tensor(name);
    std::vector<int64_t> shape = t.shape();
    auto out = torch::empty(shape, t.dtype() == StDType::I32 ? torch::kInt32 : torch::kFloat32);
    std::memcpy(out.data_ptr(), t.data, t.nbytes());
    return out;
  }

  // The reference logits of the call's last `rows` inputs, at the positions
  // they belong: [rows, vocab].
  at::Tensor referenceLogits(const CaptureStep& step, const CaptureCall& call, int64_t rows) {
    // No model of ours: the engine's own uncached forward over the context its rows claim.
    if (!references_.has(step.role)) return floatTensor(call.logits->reference);  // [rows, V]
    const auto& stream = timeline_.streams[static_cast<size_t>(step.stream)];
    const int64_t end = step.true_start + step.inputs;
    std::optional<StreamReference> own;
    const StreamReference* ref = nullptr;
    if (inputsFollowStream(step, call, stream)) {
      ref = references_.ofStream(step.role, step.stream);
    } else {  // the inputs are not the stream's: what a correct engine computes for them where they belong
      std::vector<int64_t> context(stream.begin(), stream.begin() + std::min<int64_t>(step.true_start, stream.size()));
      context.insert(context.end(), call.input_ids.begin(), call.input_ids.end());
      own = references_.of(step.role, context);
      ref = &*own;
    }
    const int64_t last = std::min(end, ref->length());
    if (last < rows) return {};  // the stream is shorter than the call's logits: nothing to compare
    std::vector<at::Tensor> out;
    for (int64_t p = last - rows; p < last; ++p) out.push_back(ref->logits(p));
    return torch::stack(out);
  }

  std::optional<CaptureDivergence> firstDivergence() {
    for (size_t i = 0; i < timeline_.steps.size(); ++i) {
      const CaptureStep& step = timeline_.steps[i];
      if (step.operation != CaptureOperation::Forward) continue;
      const CaptureCall& call = callOf(step);
      if (!call.logits || call.logits->rows == 0) continue;
      if (!references_.has(step.role) && call.logits->reference.empty()) continue;
      if (auto d = divergenceOf(step, call, i)) return d;
    }
    return std::nullopt;
  }

  std::optional<CaptureDivergence> divergenceOf(const CaptureStep& step, const CaptureCall& call, size_t step_index) {
    c10::InferenceMode guard;
    const int64_t rows = call.logits->rows;
    const at::Tensor logits_ref = referenceLogits(step, call, rows);
    if (!logits_ref.defined()) return std::nullopt;
    const at::Tensor reference = torch::log_softmax(logits_ref, -1);  // [rows, V]
    const double tol = log_probability_[static_cast<int>(step.role)];
    const bool full = file_.manifest().logits_mode == CaptureLogitsMode::Full;
    at::Tensor engine_lp, ref_lp, engine_ids;  // [rows, k] comparable log-probabilities
    if (full) {
      const at::Tensor logits = floatTensor(call.logits->logits);
      // Another vocabulary: no row can be compared, and skipping them in
      // silence would read as "every logit row matches".
      if (logits.size(1) != reference.size(1))
        throw Error(file_.path() + ": " + captureRoleName(step.role) + " call " + std::to_string(step.call) +
                    "'s logits are " + std::to_string(logits.size(1)) + " wide but the " + captureRoleName(step.role) +
                    " model's vocabulary has " + std::to_string(reference.size(1)) +
                    " ids: the capture was not made with this model");
      engine_lp = torch::log_softmax(logits, -1);
      ref_lp = reference;
      engine_ids = engine_lp.argmax(-1, true);
    } else {
      engine_ids = floatTensor(call.logits->top_ids).to(torch::kInt64);                           // [rows, k]
      engine_lp = floatTensor(call.logits->top_values) - floatTensor(call.logits->lse).unsqueeze(1);  // [rows, k]
      const int64_t top_id = engine_ids.max().item<int64_t>();  // >= 0: the reader refuses negative ids
      if (top_id >= reference.size(1))
        throw Error(file_.path() + ": " + captureRoleName(step.role) + " call " + std::to_string(step.call) +
                    "'s logits name top id " + std::to_string(top_id) + " but the " + captureRoleName(step.role) +
                    " model's vocabulary has " + std::to_string(reference.size(1)) +
                    " ids: the capture was not made with this model");
      ref_lp = reference.gather(1, engine_ids);
    }
    logit_rows_checked_ += rows;
    const at::Tensor delta = (engine_lp - ref_lp).abs().amax(-1);  // [rows]
    const at::Tensor ref_top = reference.argmax(-1);                 // [rows]
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t engine_top = engine_ids[r][0].item<int64_t>();
      const int64_t reference_top = ref_top[r].item<int64_t>();
      // A different top-1 counts only when the reference tells the two apart.
      const double gap = (reference[r][reference_top] - reference[r][engine_top]).item<double>();
      const double d = delta[r].item<double>();
      if (d <= tol && (engine_top == reference_top || gap <= tol)) {
        if (agreeing_.size() < kMaxKeptLogitRows) {
          const int64_t input = step.inputs - rows + r;
          agreeing_.push_back({step_index, step.role, step.true_start + input, d,
                               full ? std::optional<double>(klDivergence(reference[r], engine_lp[r])) : std::nullopt});
        }
        continue;
      }
      CaptureDivergence div;
      div.role = step.role;
      div.call = step.call;
      div.input = step.inputs - rows + r;
      div.position = step.true_start + div.input;
      div.max_abs_delta = d;
      if (full) div.kl = klDivergence(reference[r], engine_lp[r]);
      div.engine_top1 = engine_top;
      div.reference_top1 = reference_top;
      std::ostringstream out;
      out << captureRoleName(step.role) << " call " << step.call << "'s logits for input " << div.input << " (position "
          << div.position << ") differ from the reference: max |d log p| " << d;
      if (div.kl) out << ", KL " << *div.kl;
      out << ", top-1 " << quoted(engine_top) << (engine_top == reference_top ? " (same)" : " vs reference " + quoted(reference_top));
      div.what = out.str();
      return div;
    }
    return std::nullopt;
  }

 private:
  const CaptureCall& callOf(const CaptureStep& step) const { return file_.manifest().calls[step.manifest_call]; }

  std::string quoted(int64_t token) const {
    if (token < 0) return "<unknown>";
    std::string shown = text_ ? visibleText(text_(token)) : std::string();
    return shown.empty() ? "<id " + std::to_string(token) + ">" : "'" + shown + "'";
  }

  // Whether every input is the stream's token at the position it belongs.
  static bool inputsFollowStream(const CaptureStep& step, const CaptureCall& call, const std::vector<int64_t>& stream) {
    for (int64_t k = 0; k < step.inputs; ++k) {
      const int64_t p = step.true_start + k;
      if (p >= static_cast<int64_t>(stream.size()) || stream[static_cast<size_t>(p)] != call.input_ids[static_cast<size_t>(k)]) {
        return false;
      }
    }
    return true;
  }

  const CaptureFile& file_;
  const CaptureTimeline& timeline_;
  CaptureReferences& references_;
  const TokenText& text_;
  double log_probability_[kCaptureRoles] = {0, 0};
  int64_t logit_rows_checked_ = 0;
  std::vector<CaptureLogitRow> agreeing_;
};

// Every token id the capture feeds a reference model is inside that model's
// vocabulary: a capture without a vocab_size is read with ids up to the
// format's largest vocabulary, and an embedding lookup past the model's would
// fail inside libtorch instead of naming the file's problem.
void requireIdsInVocabulary(const CaptureFile& file, const CaptureCheckOptions& options) {
  const CaptureManifest& manifest = file.manifest();
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (!options.models[r]) continue;
    const int64_t vocab = options.models[r]->config().vocab_size;
    const auto role = static_cast<CaptureRole>(r);
    const auto outside = [&](const std::string& where, int64_t id) {
      throw Error(file.path() + ": " + where + " holds token id " + std::to_string(id) + " but the " +
                  captureRoleName(role) + " model's vocabulary has " + std::to_string(vocab) +
                  " ids: the capture was not made with this model");
    };
    for (size_t i = 0; i < manifest.calls.size(); ++i) {
      const CaptureCall& call = manifest.calls[i];
      if (call.role != role) continue;
      for (int64_t id : call.input_ids)
        if (id >= vocab) outside("call " + std::to_string(i) + " (" + captureRoleName(role) + " index " +
                                     std::to_string(call.index) + ") input_ids", id);
    }
    if (role == CaptureRole::Target && manifest.committed)
      for (int64_t id : *manifest.committed)
        if (id >= vocab) outside("committed", id);
  }
}

// Whether the engine recorded its own reference logits for some call of `role`.
bool hasSelfReference(const CaptureFile& file, CaptureRole role) {
  for (const CaptureCall& call : file.manifest().calls) {
    if (call.role == role && call.logits && !call.logits->reference.empty()) return true;
  }
  return false;
}

// A checkpoint given for a model the capture holds no weights fingerprint of
// (a hand-written module without get_input_embeddings() or an embedding
// parameter the recorder knows): it was matched by shape only.
std::string unmatchedCheckpointNote(const CaptureModel& captured) {
  if (captured.fingerprint) return "";
  return "the capture holds no weights fingerprint of the " + std::string(captureRoleName(captured.role)) +
         " (the recorder found no input embedding: a module without get_input_embeddings() and without a parameter "
         "named ...embed_tokens.weight, ...wte.weight or ...word_embeddings.weight), so the checkpoint given was "
         "matched by its shape only; if it is not the one the engine ran, its rows read as wrong K/V values "
         "(docs/engine-captures.md#how-kvscope-knows-your-model)";
}

// When the first call of a role wrote rows that differ from the reference in
// every row it wrote, the reference is the likelier culprit: a prefill no
// cache operation preceded can only be wrong by its model.
std::string everyFirstRowDiffersNote(const std::optional<RootCause>& cause) {
  if (!cause || cause->kind != "values" || cause->call != 0 || cause->rows.empty()) return "";
  if (static_cast<int64_t>(cause->rows.size()) < cause->actual_rows) return "";
  return "every row " + std::string(cacheRoleName(cause->cache)) +
         " call 0 wrote differs from the reference: the checkpoint may not be the one the engine ran (no cache "
         "operation came before that call to explain it)";
}

}  // namespace

double logProbabilityTolerance(StDType cache_dtype) {
  switch (cache_dtype) {
    case StDType::F16: return 5e-2;
    case StDType::BF16: return 0.25;
    default: return 1e-3;  // float32: only the order of sums differs
  }
}

CaptureCheckReport checkCapture(const CaptureFile& file, const CaptureTimeline& timeline, const CaptureRecordView& view,
                                const CaptureCheckOptions& options, const TokenText& text) {
  requireIdsInVocabulary(file, options);
  CaptureCheckReport report;
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (const CaptureModel* m = file.manifest().model(static_cast<CaptureRole>(r))) report.calls[r] = m->calls;
    if (file.manifest().models[r] && !options.models[r]) {
      const auto role = static_cast<CaptureRole>(r);
      const std::string& why = options.no_model_reason[static_cast<size_t>(r)];
      report.notes.push_back(std::string("no ") + captureRoleName(role) + " model" + (why.empty() ? "" : " (" + why + ")") +
                             (hasSelfReference(file, role)
                                  ? ": its rows' values were not compared with a reference; its logits were compared "
                                    "with the engine's own forward without a cache over the context its rows claim "
                                    "(recorded with reference=\"self\"); its bookkeeping (rows, positions, tokens, what "
                                    "each change kept) was checked"
                                  : ": its rows' values and logits were not compared with a reference; its bookkeeping "
                                    "(rows, positions, tokens, what each change kept) was checked"));
    }
  }
  report.committed_inferred = timeline.committed_inferred;
  if (timeline.committed_inferred) {
    report.notes.push_back("the capture has no committed sequence (rec.commit): the target's own inputs stand for it, "
                           "so a target that keeps a wrong row it also believes in is not caught");
  }
  CaptureReferences references(options.models, timeline.record.sequence, timeline.streams);
  CaptureRules rules(file, timeline, view, references, text);
  report.root_cause = walkContract(view.record, rules);
  for (int r = 0; r < kCaptureRoles; ++r) {
    const CaptureModel* captured = file.manifest().model(static_cast<CaptureRole>(r));
    const std::string note = captured && options.models[r] ? unmatchedCheckpointNote(*captured) : "";
    if (!note.empty()) report.notes.push_back(note);
  }
  if (const std::string note = everyFirstRowDiffersNote(report.root_cause); !note.empty()) report.notes.push_back(note);
  Symptom symptom(file, timeline, references, text);
  report.first_divergence = symptom.firstDivergence();
  report.rows_value_checked = rules.rowsValueChecked();
  report.max_value_error = rules.maxValueError();
  report.logit_rows_checked = symptom.logitRowsChecked();
  report.agreeing_rows = symptom.takeAgreeingRows();
  return report;
}

}  // namespace kvscope
