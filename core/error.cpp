#include "core/error.h"

namespace kvscope {

void fail(const std::string& context, const std::string& problem) {
  throw Error(context + ": " + problem);
}

}  // namespace kvscope
