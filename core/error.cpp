#include "core/error.h"

#include <cstdio>

namespace kvscope {

void fail(const std::string& context, const std::string& problem) {
  throw Error(context + ": " + problem);
}

std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace kvscope
