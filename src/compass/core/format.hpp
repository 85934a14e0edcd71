#pragma once
// Human formatting of units, one home for every layer.
#include <string>

namespace compass {

/// "12.3 us" below a millisecond, else milliseconds or seconds with `decimals` decimals
/// ("4.56 ms", "1.23 s" with the default 2).
std::string format_duration(double s, int decimals = 2);

}  // namespace compass
