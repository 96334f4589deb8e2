// Kernels whose writes are known from their name (level full):
// - whole writers overwrite every byte of a region, so the bytes there before a launch carry
//   nothing its output depends on: the region's input hash is left out. PyTorch's contiguous
//   fill: under torch.use_deterministic_algorithms every torch.empty is filled with NaN, so a
//   third of a training step's kernels are fills of fresh tensors (457 of 1130 per step on the
//   GPT example).
// - scratch words point to a buffer a launch writes and reads itself and nothing after it reads:
//   neither hashed before nor after (noted as written). PyTorch's reduce_kernel stages a global
//   reduction's partial results in `cta_buf`, allocated just before the launch and freed after
//   it: 128 MiB per bias-gradient reduction on the GPT example (8.6 GB a step hashed in and out),
//   partly written, so its bytes differ between identical runs and explain nothing.
//
// To add a kernel: match its demangled name (kernel_writes.cpp), check the layout, name the
// parameters; a unit test with the real name and layout (tests/cpu/collectors).
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

// A scratch pointer word at byte `offset` of parameter `param`. The launch's word at
// `companion_offset` must point to the allocation made right after the scratch buffer's (their
// allocation ordinals consecutive, the scratch pointer at its allocation's start): how the
// framework makes them just before the launch. Anything else is hashed as usual.
struct ScratchWord {
  uint32_t param = 0;
  uint32_t offset = 0;
  uint32_t companion_offset = 0;
};

std::optional<ScratchWord> scratch_word_of(std::string_view demangled,
                                           const std::vector<ParamInfo>& layout);

// Bytes a launch with these packed parameter bytes writes from the pointer (0 when the count is
// not positive or the bytes are short).
uint64_t whole_write_bytes(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                           const std::vector<uint8_t>& bytes);

}  // namespace lockstep::collectors
