// Varints for the record encoding: LEB128 capped at 9 bytes (the 9th byte carries 8 bits),
// so a random 64-bit value costs 9 bytes, not 10. Every decode is bounds-checked.
#pragma once

#include <cstdint>
#include <cstring>

namespace lockstep::trace {

inline constexpr int kMaxVarintBytes = 9;

inline uint8_t* put_varint(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    if (value < 0x80) {
      *out++ = static_cast<uint8_t>(value);
      return out;
    }
    *out++ = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<uint8_t>(value);  // the remaining 8 bits
  return out;
}

// Returns false when the input ends before the varint does.
inline bool get_varint(const uint8_t*& in, const uint8_t* end, uint64_t& value) {
  if (in < end && *in < 0x80) [[likely]] {  // one byte: most values
    value = *in++;
    return true;
  }
  uint64_t result = 0;
  for (int i = 0; i < 8; ++i) {
    if (in >= end) return false;
    uint8_t byte = *in++;
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      value = result;
      return true;
    }
  }
  if (in >= end) return false;
  result |= static_cast<uint64_t>(*in++) << 56;
  value = result;
  return true;
}

inline uint64_t zigzag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
inline int64_t unzigzag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

inline uint8_t* put_fixed64(uint8_t* out, uint64_t value) {
  std::memcpy(out, &value, 8);  // little-endian hosts only (x86-64, aarch64)
  return out + 8;
}
inline bool get_fixed64(const uint8_t*& in, const uint8_t* end, uint64_t& value) {
  if (end - in < 8) return false;
  std::memcpy(&value, in, 8);
  in += 8;
  return true;
}

}  // namespace lockstep::trace
