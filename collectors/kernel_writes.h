// Kernels whose writes are known from their name (level full):
// - whole writers overwrite every byte of a region, so the bytes there before a launch carry
//   nothing its output depends on: the region's input hash is left out. PyTorch's contiguous
//   fill: under torch.use_deterministic_algorithms every torch.empty is filled with NaN, so a
//   third of a training step's kernels are fills of fresh tensors (457 of 1130 per step on the
//   GPT example). The same kernel template runs every contiguous elementwise op
//   (vectorized_elementwise_kernel: data[0], its output, written for elements 0..N): where the
//   functor's name says what it returns (AUnaryFunctor/BUnaryFunctor/BinaryFunctor<a, b,
//   return_t, f>, torchgen's CUDAFunctor*_op<scalar_t>), a fresh output tensor of exactly N
//   elements is overwritten whole too (a multiply into a new tensor: otherwise a hash launch
//   each, for bytes the kernel overwrites). A lambda's return type is not in its name: no rule,
//   except for the few kernels whose lambda returns its arguments' type (SiLU, negation, copy).
//   The strided variant (elementwise_kernel over gpu_kernel_impl_nocast's lambda) writes where
//   the launch's OffsetCalculator says: whole where that lays the N outputs out densely. A
//   contiguous op with a pointer not aligned for vector loads (a view that starts mid-vector)
//   runs unrolled_elementwise_kernel with trivial offset calculators instead: the same whole
//   write. So does its casting variant (an add of a float and a bf16 tensor into a float one:
//   LoadWithCast, StoreWithCast<1>), whose output element's type and size are in the storer's
//   bytes.
// - scratch words point to a buffer a launch writes and reads itself and nothing after it reads:
//   neither hashed before nor after (noted as written). PyTorch's reduce_kernel stages a global
//   reduction's partial results in `cta_buf`, allocated just before the launch and freed after
//   it: 128 MiB per bias-gradient reduction on the GPT example (8.6 GB a step hashed in and out),
//   partly written, so its bytes differ between identical runs and explain nothing.
//
// - a reduction to one element: PyTorch's reduce_kernel writing a single output element (a
//   norm or a sum to a scalar: Adafactor takes two per parameter and step, each into a fresh
//   tensor of one element), where the launch neither accumulates into it nor has a second output:
//   the element's bytes before the launch are overwritten, so its input hash is left out, as a
//   fill's. Only where the region the word points to is exactly one element of the reduction's
//   output type (a tensor of its own under cudaMallocAsync); a longer region keeps the usual rules.
//   A reduction into a vector (row and column norms) writes each of its ReduceConfig::num_outputs
//   elements once, at distinct element offsets from dst[0]: where the region is exactly that
//   many elements, they cover it, and it is overwritten whole as well. The config's place in the
//   struct depends on the ops' and the identity's sizes, so it is found by what it must hold:
//   the launch's own block and grid (config.block(), config.grid()).
//
// - tensor lists: a multi_tensor_apply launch (foreach ops, AdamW) works on the tensors its
//   blocks name, but its address table keeps stale entries from the previous launch of a list
//   longer than one launch. Those words are not pointers of this launch: no entry at all (they
//   were 2.3 GB a step of unchanged output hashes on the GPT example, and they kept the list's
//   read-only words from being learned).
//
// To add a kernel: match its demangled name (kernel_writes.cpp), check the layout, name the
// parameters; a unit test with the real name and layout (tests/cpu/collectors).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "collectors/kernel_params.h"

namespace lockstep::collectors {

// `count` elements of `element_bytes` each written contiguously from the pointer in parameter
// `pointer_param` (its first word); the count is the int32 in parameter `count_param`. A fill
// writes the value held in parameter `value_param` (its functor is the value) into each element;
// any other writer has kNoValue there. A casting store (PyTorch's StoreWithCast<1>: {ScalarType
// dtypes[1]; uint32_t element_sizes[1]}) names its element's type and size per launch, in
// parameter `stored_param`: then element_bytes is 0 and the launch's bytes say it.
struct WholeWrite {
  static constexpr uint32_t kNoValue = ~0u;
  uint32_t count_param = 0;
  uint32_t pointer_param = 0;
  uint32_t element_bytes = 0;
  uint32_t value_param = kNoValue;
  uint32_t stored_param = kNoValue;
};

// The write a kernel of this demangled name makes, when known and the layout is the expected one.
std::optional<WholeWrite> whole_write_of(std::string_view demangled,
                                         const std::vector<ParamInfo>& layout);

// PyTorch's strided elementwise kernel (CUDALoops.cuh's gpu_kernel_impl_nocast<func_t>, the
// same ops as above on tensors that are not all contiguous): elementwise_kernel<nt, vt, L>(int
// N, L f), where the lambda L writes f's result for element i to data[0] + offset_calc.get(i)[0]
// and captures `OffsetCalculator<K> offset_calc` (int dims; IntDivider<uint32_t> sizes_[25];
// uint32_t strides_[25][K], byte strides), `std::array<char*, K> data` and the functor. Which of
// the two comes first in the closure is the compiler's: both places are kept, and each launch's
// bytes say which holds an offset calculator (strided_output).
struct StridedWrite {
  uint32_t count_param = 0;    // int N
  uint32_t closure_param = 1;  // the lambda
  uint32_t args = 0;           // K: the output and the functor's inputs
  uint32_t element_bytes = 0;  // the functor's result type
  // (offset calculator, data[0]) byte offsets inside the closure: calculator first, data first.
  std::array<std::pair<uint32_t, uint32_t>, 2> places{};
};

std::optional<StridedWrite> strided_write_of(std::string_view demangled,
                                             const std::vector<ParamInfo>& layout);

// Where a launch with these packed bytes keeps its offset calculator and data, and what it
// writes. Only when one of the two places holds a calculator as PyTorch builds it (1 to 25
// dims, each divider's magic numbers those of its divisor, the sizes' product N); nullopt
// otherwise (or when both do). `bytes`: N x element_bytes when the output strides lay the N
// elements out densely from data[0] (sorted by stride: the element's size first, then each
// stride the previous one times its size), so that they cover exactly those bytes once each;
// 0 for a gap, an overlap or a broadcast output. The calculator's words past its `dims` are
// whatever the host's stack held (PyTorch sets only the first dims): no pointers, whatever
// they look like.
struct StridedOutput {
  uint32_t data_offset = 0;        // data[0] inside the closure
  uint64_t bytes = 0;              // written densely from data[0], or 0
  uint32_t calculator_offset = 0;  // the calculator inside the closure
  uint32_t calculator_bytes = 0;
};
std::optional<StridedOutput> strided_output(const StridedWrite& write,
                                            const std::vector<ParamInfo>& layout,
                                            const std::vector<uint8_t>& bytes);

// PyTorch's concatenation (aten/src/ATen/native/cuda/Shape.cu): CatArrayBatchedCopy<T, IndexType,
// Dims, batch_size, stride_size>(T* output, CatArrInputTensorMetadata<T, IndexType, batch_size,
// stride_size> inputs, TensorSizeStride<IndexType, 4> os, int concatDim, IndexType dimStride),
// the metadata {T* input[n]; IndexType offset[n], dimSize[n], nElements[n]; bool
// isContiguous[n]; TensorSizeStride tensorStride[stride_size]} and TensorSizeStride {IndexType
// tensorSize[4], tensorStride[4]}. Block row y copies input y's nElements[y] elements to the
// output's slab [offset[y], offset[y] + dimSize[y]) of dimension concatDim (CatArrIndexToOffset:
// the output's sizes, that one dimSize[y], and its strides). Matched for T = OpaqueType<N> (N
// bytes) and a 32-bit IndexType.
struct CatWrite {
  uint32_t element_bytes = 0;  // sizeof(T)
  uint32_t dims = 0;           // Dims: the output's dimensions
  uint32_t batch = 0;          // batch_size: the metadata's arrays
  uint32_t strides = 0;        // stride_size: its tensorStride entries
};
std::optional<CatWrite> cat_write_of(std::string_view demangled,
                                     const std::vector<ParamInfo>& layout);

// What a launch with these packed bytes and grid_y inputs (its block rows) writes: `bytes`, the
// output's whole N x sizeof(T) where the inputs' slabs tile the concatenated dimension (offsets
// from 0, each starting where the last ended, ending at its size; each input's nElements its
// slab's) and the output's strides lay it out densely, else 0; `pointers_to`, the byte (in the
// metadata parameter) where the launch's input pointers end: input[grid_y..n) and the arrays
// after them hold no pointer of this launch (what the host's struct held before). Nullopt when
// the bytes do not read as PyTorch's (grid_y 0 or past n, dims or concatDim out of range).
struct CatOutput {
  uint64_t bytes = 0;
  uint32_t pointers_to = 0;
};
std::optional<CatOutput> cat_output(const CatWrite& write, const std::vector<ParamInfo>& layout,
                                    const std::vector<uint8_t>& bytes, uint32_t grid_y);

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

// PyTorch's reduce_kernel<nt, output_vec_size, ReduceOp<scalar_t, ops_t, index_t, out_scalar_t,
// ...>>(ReduceOp) (aten/src/ATen/native/cuda/Reduce.cuh): one by-value struct that ends with
// `const void* src; const char* dst[2]; void* acc_buf; void* cta_buf; int* semaphores; int64_t
// base_idx; bool accumulate; bool final_output; int noutputs;`, so dst[0] is 56 bytes before its
// end. Offsets are the parameter's bytes; `element_bytes` is sizeof(out_scalar_t).
struct ReducedElement {
  uint32_t param = 0;
  uint32_t dst_offset = 0;
  uint32_t acc_buf_offset = 0;
  uint32_t accumulate_offset = 0;
  uint32_t final_output_offset = 0;
  uint32_t noutputs_offset = 0;
  uint32_t element_bytes = 0;
};

std::optional<ReducedElement> reduced_element_of(std::string_view demangled,
                                                 const std::vector<ParamInfo>& layout);

// Whether a launch with these packed bytes writes its dst[0] without reading it first: one
// output, no accumulation into it, and either no acc_buf or the final output (Reduce.cuh's
// ReduceOp::run stores the value to dst then; it reads dst only to accumulate). False when the
// bytes are short.
bool reduction_overwrites_output(const ReducedElement& reduced,
                                 const std::vector<ParamInfo>& layout,
                                 const std::vector<uint8_t>& bytes);

// What a launch's ReduceConfig says, found in the ReduceOp parameter where a place before its
// tail holds a config with the launch's block (block_width, block_height, num_threads) and grid
// (num_outputs / output_vec_size over step_output blocks, ctas_per_output) and sane counts:
// `outputs`, its num_outputs (a reduction into a vector writes that many elements from dst[0]),
// and the bytes [calculators_from, calculators_to) that hold its two offset calculators
// (input_calc, output_calc: between the config and src). Their dimensions past `dims` are
// whatever the host's stack held (as a strided elementwise calculator's): no pointers, whatever
// they look like. Nullopt when no config is found. One search for both.
struct ReductionConfig {
  uint64_t outputs = 0;
  uint32_t calculators_from = 0;
  uint32_t calculators_to = 0;
};
std::optional<ReductionConfig> reduction_config(const ReducedElement& reduced,
                                                const std::vector<ParamInfo>& layout,
                                                const std::vector<uint8_t>& bytes,
                                                const unsigned grid[3], const unsigned block[3]);

// PyTorch's multi_tensor_apply_kernel<TensorListMetadata<depth>, ...>(TensorListMetadata<depth>,
// ...) (aten/src/ATen/native/cuda/MultiTensorApply.cuh): parameter `param` is
// {const void* addresses[depth][max_tensors]; int64_t numel_for_tensor[max_tensors];
//  unsigned char block_to_tensor[max_blocks]; int block_to_chunk[max_blocks];
//  int start_tensor_this_launch;}, and block b works on tensor block_to_tensor[b] alone.
// max_tensors is read from the parameter's size (PyTorch's table has changed between versions).
struct TensorList {
  uint32_t param = 0;
  uint32_t depth = 0;
  uint32_t max_tensors = 0;
  uint32_t max_blocks = 0;
};

std::optional<TensorList> tensor_list_of(std::string_view demangled,
                                         const std::vector<ParamInfo>& layout);

// Sets (*touched)[t] for each tensor t that blocks [0, grid_x) of a launch with these packed
// bytes work on. False when the bytes do not read as PyTorch's (more blocks than the table, a
// tensor index out of range or going down from block to block, a tensor of no elements): then
// every word is a pointer as usual.
bool touched_tensors(const TensorList& list, const std::vector<ParamInfo>& layout,
                     const std::vector<uint8_t>& bytes, uint32_t grid_x,
                     std::vector<uint8_t>* touched);

// The tensor whose address the word at packed byte `byte_offset` holds, or -1 (not an address).
int tensor_of_word(const TensorList& list, const std::vector<ParamInfo>& layout,
                   uint32_t byte_offset);

// Bytes a launch with these packed parameter bytes writes from the pointer (0 when the count is
// not positive, the bytes are short, or a casting store's type and size do not agree).
uint64_t whole_write_bytes(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                           const std::vector<uint8_t>& bytes);
// The element value a launch writes (its bytes, the rest zero): false when the value parameter
// is not one element of at most 16 bytes or the bytes are short.
bool whole_write_value(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                       const std::vector<uint8_t>& bytes, std::array<uint8_t, 16>* value);

}  // namespace lockstep::collectors
