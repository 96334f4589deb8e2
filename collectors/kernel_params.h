// Kernel argument decoding: the parameter layout (offset, size per parameter, from
// cu{Kernel,Func}GetParamInfo) applied to either launch form, then split into scalar bytes
// (digested) and pointer words that fall into known allocations (recorded as allocation
// ordinal + offset, excluded from the digest because addresses move between runs).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "collectors/alloc_map.h"

namespace lockstep::collectors {

struct ParamInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
};

// Builds the packed argument buffer (laid out as the extra-form buffer) from kernel_params
// (array of pointers, one per parameter) or, when kernel_params is null, from extra
// ({CU_LAUNCH_PARAM_BUFFER_POINTER, p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}).
// False when neither form gives the bytes.
bool gather_param_bytes(const std::vector<ParamInfo>& layout, void** kernel_params, void** extra,
                        std::vector<uint8_t>* out);

struct PointerArg {
  uint32_t param = 0;        // parameter index
  uint32_t byte_offset = 0;  // offset of the word inside the packed buffer
  uintptr_t value = 0;
  AllocationHit hit;
};

struct DecodedArgs {
  uint64_t scalar_digest = 0;  // digest of the bytes with pointer words zeroed
  std::vector<PointerArg> pointers;
};

// Every 8-byte aligned word inside each parameter is a pointer candidate; it counts as a
// pointer only if `lookup` finds it in a known allocation.
using PointerLookup = std::function<std::optional<AllocationHit>(uintptr_t)>;
DecodedArgs decode_args(const std::vector<ParamInfo>& layout, const std::vector<uint8_t>& bytes,
                        const PointerLookup& lookup);
// The same into *out, whose pointer list keeps its capacity: a launch at full decodes into one
// buffer per thread instead of growing a new vector (three allocations for three pointers).
// `candidates`: where `lookup` may find anything (AllocationMap::Reader::range); a word outside
// it is not asked. An offset calculator's or a reduction config's dividers and strides (tens of
// nonzero words, none a pointer) then cost a compare each, not a call through `lookup` (~50
// instructions a word: 96 such words doubled a full launch's count, launch_lines.py --params wide).
void decode_args(const std::vector<ParamInfo>& layout, const std::vector<uint8_t>& bytes,
                 const PointerLookup& lookup, DecodedArgs* out, AddressRange candidates = {});

}  // namespace lockstep::collectors
