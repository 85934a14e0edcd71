#include "compass/core/result.hpp"

namespace compass {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal error: check '{}' failed at {}:{}{}{}", expr, file, line,
                                  msg.empty() ? "" : ": ", msg));
}

}  // namespace compass
