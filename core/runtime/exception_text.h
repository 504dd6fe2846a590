#pragma once
// The message of any exception a front end catches, ready to show:
// libtorch's without the C++ backtrace it carries (a user needs the reason,
// not frames), every message clipped and escaped by displayableError
// (core/error_text.h).
#include <exception>
#include <string>

namespace kvscope {

std::string exceptionText(const std::exception& error);

}  // namespace kvscope
