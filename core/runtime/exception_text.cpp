#include "core/runtime/exception_text.h"

#include <c10/util/Exception.h>

#include "core/error_text.h"

namespace kvscope {

std::string exceptionText(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error))
    return displayableError(torch_error->what_without_backtrace());
  return displayableError(error.what());
}

}  // namespace kvscope
