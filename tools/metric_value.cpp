#include "tools/metric_value.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace lockstep::tools {
namespace {

template <class T>
T load_le(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

float f16_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float value;
  if (exp == 0)
    value = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    value = mant ? NAN : INFINITY;
  else
    value = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -value : value;
}

// Element types this decoder reads as numbers; any other is shown byte by byte.
bool decodable(trace::DType dtype) {
  using trace::DType;
  switch (dtype) {
    case DType::F32:
    case DType::F64:
    case DType::BF16:
    case DType::F16:
    case DType::I32:
    case DType::U32:
    case DType::I64:
    case DType::U64:
    case DType::I8:
    case DType::U8:
    case DType::Bytes:
      return true;
    default:
      return false;
  }
}

// The dtype the shim could not know, from the payload's size: a loss is one float (bf16, f32,
// f64); a few statistics copied at once are f32 elements more often than anything else.
trace::DType guess_dtype(size_t bytes) {
  using trace::DType;
  if (bytes == 2) return DType::BF16;
  if (bytes == 8) return DType::F64;
  if (bytes > 0 && bytes % 4 == 0) return DType::F32;
  return DType::Bytes;
}

}  // namespace

MetricValue decode_metric(const std::vector<uint8_t>& payload, uint64_t dtype_hint) {
  using trace::DType;
  MetricValue out;
  out.dtype = static_cast<DType>(dtype_hint);
  int width = trace::dtype_bits(out.dtype) / 8;
  const bool known = dtype_hint != 0 && dtype_hint <= 0xff && width > 0 &&
                     payload.size() % width == 0 && decodable(out.dtype);
  if (!known) {
    out.dtype = guess_dtype(payload.size());
    out.guessed = true;
    width = std::max(1, trace::dtype_bits(out.dtype) / 8);
  }
  const size_t count = payload.size() / width;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = payload.data() + i * width;
    double v = 0;
    switch (out.dtype) {
      case DType::F32:
        v = load_le<float>(p);
        out.texts.push_back(fmt::format("{}", load_le<float>(p)));
        break;
      case DType::F64:
        v = load_le<double>(p);
        out.texts.push_back(fmt::format("{}", v));
        break;
      case DType::BF16:
        v = bf16_to_float(load_le<uint16_t>(p));
        out.texts.push_back(fmt::format("{}", bf16_to_float(load_le<uint16_t>(p))));
        break;
      case DType::F16:
        v = f16_to_float(load_le<uint16_t>(p));
        out.texts.push_back(fmt::format("{}", f16_to_float(load_le<uint16_t>(p))));
        break;
      case DType::I32:
        v = load_le<int32_t>(p);
        out.texts.push_back(fmt::format("{}", load_le<int32_t>(p)));
        break;
      case DType::U32:
        v = load_le<uint32_t>(p);
        out.texts.push_back(fmt::format("{}", load_le<uint32_t>(p)));
        break;
      case DType::I64:
        v = static_cast<double>(load_le<int64_t>(p));
        out.texts.push_back(fmt::format("{}", load_le<int64_t>(p)));
        break;
      case DType::U64:
        v = static_cast<double>(load_le<uint64_t>(p));
        out.texts.push_back(fmt::format("{}", load_le<uint64_t>(p)));
        break;
      case DType::I8:
        v = static_cast<int8_t>(*p);
        out.texts.push_back(fmt::format("{}", static_cast<int8_t>(*p)));
        break;
      default:
        v = *p;
        out.texts.push_back(fmt::format("{}", static_cast<unsigned>(*p)));
        break;
    }
    out.values.push_back(v);
  }
  for (size_t i = 0; i < payload.size(); ++i) {
    // Most significant byte first within an element, as people read a float's bits.
    const size_t element = i / width, within = i % width;
    const size_t index = element * width + (width - 1 - within);
    if (index < payload.size()) out.hex += fmt::format("{:02x}", payload[index]);
    if (within == static_cast<size_t>(width) - 1 && i + 1 < payload.size()) out.hex += ' ';
  }
  return out;
}

std::string format_metric_value(const std::vector<uint8_t>& payload, uint64_t dtype_hint) {
  const MetricValue value = decode_metric(payload, dtype_hint);
  std::string values;
  for (size_t i = 0; i < value.texts.size() && i < 4; ++i)
    values += (i ? ", " : "") + value.texts[i];
  if (value.texts.size() > 4) values += ", ...";
  // At most 32 bytes of hex: the elements whose hex starts within them.
  std::string hex = value.hex;
  const size_t digits = 64 + 64 / std::max<size_t>(1, trace::dtype_bits(value.dtype) / 4);
  if (payload.size() > 32 && hex.size() > digits) {
    hex.resize(digits);  // ends with the space after the last element kept
    hex += "...";
  }
  return fmt::format("{} {} (0x{})", trace::dtype_name(value.dtype), values, hex);
}

std::string metric_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                              uint64_t dtype_hint) {
  const MetricValue x = decode_metric(a, dtype_hint), y = decode_metric(b, dtype_hint);
  const size_t n = std::max(x.texts.size(), y.texts.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string xa = i < x.texts.size() ? x.texts[i] : "-";
    const std::string yb = i < y.texts.size() ? y.texts[i] : "-";
    if (xa == yb) continue;  // same text, other bits (NaN payloads): the hex lines show them
    return fmt::format("{}{} {} vs {}", trace::dtype_name(x.dtype),
                       n > 1 ? fmt::format(" [{} of {}]", i, n) : std::string(), xa, yb);
  }
  return {};
}

}  // namespace lockstep::tools
