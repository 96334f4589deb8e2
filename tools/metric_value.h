// A Metric record's payload (the bytes of a small device-to-host copy: loss.item()) decoded by
// its dtype: used by `show`, `export` and the diff's text and JSON reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/record.h"

namespace lockstep::tools {

struct MetricValue {
  trace::DType dtype = trace::DType::Bytes;
  // The dtype came from the payload's size, not from the record's dtype_hint (the shim cannot
  // know what a copy holds): 2 bytes bf16, 4 f32, 8 f64, another multiple of 4 f32 elements,
  // anything else bytes.
  bool guessed = false;
  std::vector<double> values;  // every element (integers exactly up to 2^53)
  std::vector<std::string> texts;  // each element as people read it ("2.5", "-3")
  std::string hex;  // most significant byte first per element, elements separated by spaces
};

MetricValue decode_metric(const std::vector<uint8_t>& payload, uint64_t dtype_hint);

// "f32 2.5 (0x40200000)": the dtype, at most 4 elements, and the bytes in hex (at most 32).
std::string format_metric_value(const std::vector<uint8_t>& payload, uint64_t dtype_hint);

// The first element where two payloads differ, as "f32 2.3456 vs 2.3457" (with "[i of n]" when
// there are several elements); "" when they decode to the same elements.
std::string metric_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                              uint64_t dtype_hint);

}  // namespace lockstep::tools
