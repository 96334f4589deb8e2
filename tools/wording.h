// Counts as people write them: "1 rank", "2 ranks", "no records"; bytes in binary units.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace lockstep::tools {

// "1 rank" / "8 ranks" (0 takes the plural: "0 ranks").
inline std::string count_of(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// "95.2 MiB" (bytes below 1 KiB: "512 B").
inline std::string binary_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) value /= 1024, ++unit;
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace lockstep::tools
