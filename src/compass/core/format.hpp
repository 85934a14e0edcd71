#pragma once
// Human formatting of units and splitting of saved text, one home for every layer.
#include <string>
#include <string_view>
#include <vector>

namespace compass {

/// "12.3 us" below a millisecond, else milliseconds or seconds with `decimals` decimals
/// ("4.56 ms", "1.23 s" with the default 2).
/// "n/a" when `s` is not finite.
std::string format_duration(double s, int decimals = 2);

/// A ratio such as a speedup: "1.234x" with `decimals` decimals, "n/a" when it is not finite
/// (0/0 or x/0 never prints as "nanx", "-nanx" or "infx").
std::string format_ratio(double r, int decimals = 3);

/// The whitespace-separated words of `line` (for parsers of saved tool output).
std::vector<std::string> split_ws(std::string_view line);

}  // namespace compass
