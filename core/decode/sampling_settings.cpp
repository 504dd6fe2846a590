#include "core/decode/sampling_settings.h"

#include <sstream>

#include "core/error.h"

namespace kvscope {

void SamplingSettings::validate() const {
  if (greedy) return;
  if (!(temperature > 0.0)) throw Error("sampling: temperature must be > 0, got " + std::to_string(temperature));
  if (top_k < 0) throw Error("sampling: top-k must be >= 0, got " + std::to_string(top_k));
  if (!(top_p > 0.0 && top_p <= 1.0)) throw Error("sampling: top-p must be in (0, 1], got " + std::to_string(top_p));
}

std::string SamplingSettings::describe() const {
  if (greedy) return "greedy";
  std::ostringstream out;
  out << "temperature " << temperature;
  if (top_k > 0) out << ", top-k " << top_k;
  if (top_p < 1.0) out << ", top-p " << top_p;
  return out.str();
}

}  // namespace kvscope
