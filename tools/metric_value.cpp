#include "tools/metric_value.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "trace/record.h"

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

}  // namespace

std::string format_metric_value(const std::vector<uint8_t>& payload, uint64_t dtype_hint) {
  using trace::DType;
  DType dtype = static_cast<DType>(dtype_hint);
  int width = trace::dtype_bits(dtype) / 8;
  bool known = dtype_hint != 0 && width > 0 && payload.size() % width == 0;
  if (!known) {
    if (payload.size() == 2)
      dtype = DType::BF16;
    else if (payload.size() == 4)
      dtype = DType::F32;
    else if (payload.size() == 8)
      dtype = DType::F64;
    else
      dtype = DType::Bytes;
    width = std::max(1, trace::dtype_bits(dtype) / 8);
  }
  std::string values;
  size_t count = payload.size() / width;
  for (size_t i = 0; i < count && i < 4; ++i) {
    const uint8_t* p = payload.data() + i * width;
    std::string v;
    switch (dtype) {
      case DType::F32:
        v = fmt::format("{}", load_le<float>(p));
        break;
      case DType::F64:
        v = fmt::format("{}", load_le<double>(p));
        break;
      case DType::BF16:
        v = fmt::format("{}", bf16_to_float(load_le<uint16_t>(p)));
        break;
      case DType::F16:
        v = fmt::format("{}", f16_to_float(load_le<uint16_t>(p)));
        break;
      case DType::I32:
        v = fmt::format("{}", load_le<int32_t>(p));
        break;
      case DType::U32:
        v = fmt::format("{}", load_le<uint32_t>(p));
        break;
      case DType::I64:
        v = fmt::format("{}", load_le<int64_t>(p));
        break;
      case DType::U64:
        v = fmt::format("{}", load_le<uint64_t>(p));
        break;
      default:
        v = fmt::format("{}", static_cast<unsigned>(*p));
        break;
    }
    values += (i ? ", " : "") + v;
  }
  if (count > 4) values += ", ...";
  std::string hex;
  for (size_t i = 0; i < payload.size() && i < 32; ++i) {
    // Most significant byte first for one element, as people read a float's bits.
    size_t element = i / width, within = i % width;
    size_t index = element * width + (width - 1 - within);
    if (index < payload.size()) hex += fmt::format("{:02x}", payload[index]);
    if (within == static_cast<size_t>(width) - 1 && i + 1 < payload.size()) hex += ' ';
  }
  if (payload.size() > 32) hex += "...";
  return fmt::format("{} {} (0x{})", trace::dtype_name(dtype), values, hex);
}

}  // namespace lockstep::tools
