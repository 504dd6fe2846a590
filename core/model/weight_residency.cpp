#include "core/model/weight_residency.h"

#include "core/error.h"

namespace kvscope {

WeightResidency parseWeightResidency(const std::string& text, const std::string& option) {
  if (text == "stored") return WeightResidency::Stored;
  if (text == "fp32") return WeightResidency::Float32;
  throw Error(option + " must be 'stored' (weights kept in the checkpoint's dtype) or 'fp32' (widened to float32 "
              "at load), got '" + text + "'");
}

const char* weightResidencyName(WeightResidency residency) {
  return residency == WeightResidency::Stored ? "stored" : "fp32";
}

}  // namespace kvscope
