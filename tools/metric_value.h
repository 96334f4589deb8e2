// How the CLI prints a Metric record's payload (loss.item() bytes): used by `show` and by the
// diff's text and JSON reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::tools {

// "f32 2.5 (0x40200000)" for a metric payload: element type from dtype_hint, else guessed from
// the byte count (2: bf16, 4: f32, 8: f64, else bytes); at most 4 elements shown, and the bytes
// in hex (most significant first per element, at most 32).
std::string format_metric_value(const std::vector<uint8_t>& payload, uint64_t dtype_hint);

}  // namespace lockstep::tools
