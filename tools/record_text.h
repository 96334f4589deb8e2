// One record as text for people: its fields decoded (trace/field_format.h), its buffers, its
// metric payload, its warning as a sentence. `show` prints these lines; `export` puts the same
// texts in its events' arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "trace/reader.h"
#include "trace/record.h"

namespace lockstep::tools {

// " m=128 n=64 type_a=CUDA_R_16BF ... algo=heuristic": each field `show` prints (field_shown),
// a space before each; `name` is the record's name (the GEMM API tells how algo reads).
std::string fields_text(const trace::Record& r, std::string_view name);

// "in A bf16 1024B 00ab...": role, label, dtype, bytes, then the fingerprint or what stands
// for it (-, dropped, unwritten) and its flags (clamped, read-only, recalled, enclosing), then
// the allocation @ordinal+offset when known.
std::string buffer_text(const trace::BufferFingerprint& b, std::string_view label);

// The fingerprint part of buffer_text alone: "00ab... read-only", "unwritten", "-".
std::string fingerprint_text(const trace::BufferFingerprint& b);

// A Warning record as a sentence (trace/warning_codes.def); "" for any other kind.
std::string warning_sentence(const trace::Record& r, std::string_view name);

// `show`'s line: "r0 step 3 seq 45 stream 1 thread 0 gemm cublasLtMatmul m=... | in A ...",
// ending "| scope blocks.1.mlp (forward)" when ranges were open on the thread (scope_text.h).
std::string record_line(int rank, const trace::Record& r, trace::TraceReader& reader);

// Records of steps [first_step, last_step] in sequence order (the process's call order): the
// trace holds them per thread, so a window of whole steps (about kWindowRecords records, by the
// step summaries) is decoded and sorted at a time; memory follows the window, not the trace.
// Records of steps with no summary (a cut-off tail) come last, sorted among themselves. The
// callback returns false to stop.
inline constexpr uint64_t kWindowRecords = 65536;
void for_each_record_in_seq_order(trace::TraceReader& reader, uint32_t first_step,
                                  uint32_t last_step,
                                  const std::function<bool(const trace::Record&)>& callback);

}  // namespace lockstep::tools
