#pragma once
// Human formatting of units and splitting of saved text, one home for every layer.
#include <string>
#include <string_view>
#include <vector>

namespace compass {

/// "12.3 us" below a millisecond, else milliseconds or seconds with `decimals` decimals
/// ("4.56 ms", "1.23 s" with the default 2).
std::string format_duration(double s, int decimals = 2);

/// The whitespace-separated words of `line` (for parsers of saved tool output).
std::vector<std::string> split_ws(std::string_view line);

}  // namespace compass
