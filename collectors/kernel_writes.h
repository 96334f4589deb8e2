// Kernels whose writes are known from their name: a launch of one overwrites every byte of a
// region, so the bytes there before it carry nothing its output depends on, and the region's
// input hash is left out (level full). Only PyTorch's contiguous fill so far: under
// torch.use_deterministic_algorithms every torch.empty is filled with NaN, so a third of a
// training step's kernels are fills of fresh tensors (457 of 1130 per step on the GPT example).
//
// To add a kernel: match its demangled name in whole_write_of (kernel_writes.cpp), name the
// parameter that holds the element count and the one whose pointer it writes from, and the
// element size; a unit test with the real name and layout (tests/cpu/collectors).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "collectors/kernel_params.h"

namespace lockstep::collectors {

// `count` elements of `element_bytes` each written contiguously from the pointer in parameter
// `pointer_param` (its first word); the count is the int32 in parameter `count_param`.
struct WholeWrite {
  uint32_t count_param = 0;
  uint32_t pointer_param = 0;
  uint32_t element_bytes = 0;
};

// The write a kernel of this demangled name makes, when known and the layout is the expected one.
std::optional<WholeWrite> whole_write_of(std::string_view demangled,
                                         const std::vector<ParamInfo>& layout);

// Bytes a launch with these packed parameter bytes writes from the pointer (0 when the count is
// not positive or the bytes are short).
uint64_t whole_write_bytes(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                           const std::vector<uint8_t>& bytes);

}  // namespace lockstep::collectors
