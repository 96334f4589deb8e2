// What differs between two GEMMs' fields, in words: for cuBLASLt the parts of the algorithm it
// chose ("split-K 1 vs 4, reduction none vs in-place") instead of the packed numbers, for every
// other field its name and both values as `show` prints them. The diff's structural detail.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace lockstep::tools {

// `api` is the record's name (cublasLtMatmul, cublasGemmEx, ...); a and b its fields in the two
// runs (trace::fields::Gemm). "" when they are equal.
std::string gemm_fields_difference(std::string_view api, std::span<const uint64_t> a,
                                   std::span<const uint64_t> b);

// A cuBLASLt reduction scheme in words: "none", "in-place", "compute type", "output type".
std::string reduction_scheme_words(uint64_t scheme);

}  // namespace lockstep::tools
