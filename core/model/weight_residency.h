#pragma once
// In which dtype a model's weights are held in memory once loaded.
//
// Stored (the default): bfloat16 and float16 checkpoints keep their dense
// weights (every matrix the model multiplies, and the embedding) in that
// dtype; the few-row kernel widens them to float32 in registers and every sum
// is float32 (core/model/dense.h), so the logits are those of the widened
// weights. A decode step of a memory-bound model reads half the bytes (a
// 0.5 B model: 0.99 GB instead of 1.98 GB), and the model takes half the
// memory. Norm gains, biases and position tables are small and are widened.
// Float32: every floating tensor widened at load, as before; float32
// checkpoints load the same either way. docs/performance-weights.md says when
// that is worth it.
#include <string>

namespace kvscope {

enum class WeightResidency { Stored, Float32 };

// "stored" or "fp32" (what `--weights` takes); anything else is an Error
// naming `option` and the accepted values.
WeightResidency parseWeightResidency(const std::string& text, const std::string& option = "--weights");

// "stored" or "fp32".
const char* weightResidencyName(WeightResidency residency);

}  // namespace kvscope
