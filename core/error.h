#pragma once
// One exception type for everything the core rejects: bad files, bad
// parameters, broken invariants. The message always names what was being
// done and the problem ("loading model.safetensors: tensor 'x' ...").
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kvscope {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error("<context>: <problem>").
[[noreturn]] void fail(const std::string& context, const std::string& problem);

// A number as a message shows it: "%g" (0.25, 1e-05, 32), so a setting the
// user typed reads back as typed.
std::string formatNumber(double value);

// Throws Error(message) unless the condition holds.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

// The same with the message built only when the condition fails: for checks
// on every forward, where building "layer 3 holds ..." each time would cost
// more than the check.
template <typename MakeMessage, typename = std::enable_if_t<std::is_invocable_r_v<std::string, MakeMessage>>>
inline void require(bool condition, MakeMessage&& make_message) {
  if (!condition) throw Error(make_message());
}

}  // namespace kvscope
