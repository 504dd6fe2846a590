#include "core/model/forward_runner.h"

#include "core/model/causal_lm.h"

namespace kvscope {
namespace {

class DirectForwards : public ForwardRunner {
 public:
  at::Tensor run(const CausalLM& model, const SequenceForward& f) override {
    return f.unchecked ? model.forwardUnchecked(f.tokens, f.start_pos, f.cache, f.probes, f.logit_rows)
                       : model.forward(f.tokens, f.start_pos, f.cache, f.probes, f.logit_rows);
  }
};

}  // namespace

ForwardRunner& directForwards() {
  static DirectForwards runner;  // stateless: one for every caller and thread
  return runner;
}

}  // namespace kvscope
