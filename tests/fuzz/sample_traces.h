// Small valid traces of several shapes: the fuzzer's seed corpus and the regression tests' input.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "trace/record.h"
#include "trace/writer.h"

namespace lockstep::trace::testing {

// A record of `kind` with every field, several buffers and (Metric) a payload, drawn from rng;
// value sizes vary from 0 to full 64-bit. String ids are interned in `writer` when given.
Record random_record(RecordKind kind, std::mt19937_64& rng, TraceWriter* writer);

// Writes a sample trace: variant picks the shape (one kind only, all kinds, several steps with
// summaries, several threads, long strings...). Returns false and sets *error on failure.
bool write_sample_trace(const std::string& path, int variant, std::string* error);
inline constexpr int kSampleVariants = 6;

// Reads everything the reader offers (header, blocks, summaries, records, strings, verify_all);
// TraceError propagates. Returns the number of records seen.
size_t read_everything(const std::string& path);

}  // namespace lockstep::trace::testing
