#include "core/model/probe.h"

namespace kvscope {

const char* probeName(Probe probe) {
  switch (probe) {
    case Probe::Query: return "query";
    case Probe::Key: return "key";
    case Probe::Value: return "value";
    case Probe::AttentionWeights: return "attention weights";
    case Probe::AttentionOutput: return "attention output";
    case Probe::AttentionMask: return "attention mask";
    case Probe::LayerInput: return "layer input";
    case Probe::QueryBeforeRope: return "query before RoPE";
    case Probe::KeyBeforeRope: return "key before RoPE";
    case Probe::AttentionProjected: return "attention output after o_proj";
    case Probe::LayerOutput: return "layer output";
  }
  return "unknown probe";
}

}  // namespace kvscope
