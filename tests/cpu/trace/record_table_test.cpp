#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "trace/encoding.h"
#include "trace/record.h"

namespace lockstep::trace {
namespace {

TEST(RecordTable, KindsInIdOrderWithNamesAndFields) {
  const auto& kinds = record_kinds();
  ASSERT_EQ(kinds.size(), 14u);
  for (size_t i = 1; i < kinds.size(); ++i)
    EXPECT_LT(static_cast<int>(kinds[i - 1].kind), static_cast<int>(kinds[i].kind));
  const RecordKindInfo* kernel = find_record_kind("kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->kind, RecordKind::Kernel);
  ASSERT_EQ(kernel->field_names.size(), static_cast<size_t>(fields::Kernel::kCount));
  EXPECT_EQ(kernel->field_names[fields::Kernel::grid_x], "grid_x");
  EXPECT_EQ(kernel->field_names[fields::Kernel::args_digest], "args_digest");
  EXPECT_EQ(kernel->field_names.back(), "outer_api");
  for (const auto& info : kinds) {
    EXPECT_EQ(static_cast<int>(info.field_names.size()), field_count(info.kind)) << info.name;
    EXPECT_EQ(find_record_kind(static_cast<uint8_t>(info.kind)), &info);
    EXPECT_EQ(record_kind_name(info.kind), info.name);
    for (auto name : info.field_names) {
      EXPECT_FALSE(name.empty());
      EXPECT_EQ(name.find_first_of(" ,\n/"), std::string_view::npos) << name;
    }
  }
  EXPECT_EQ(find_record_kind("collective")->field_names[fields::Collective::in_place], "in_place");
  EXPECT_EQ(find_record_kind(uint8_t{0}), nullptr);
  EXPECT_EQ(find_record_kind(uint8_t{200}), nullptr);
  EXPECT_EQ(find_record_kind("no-such-kind"), nullptr);
}

// The diff columns of record_kinds.def: every name they give is a field of the row, and the
// columns do not contradict each other.
TEST(RecordTable, DiffColumnsNameFieldsOfTheirRow) {
  for (const RecordKindInfo& info : record_kinds()) {
    const KindDiff& diff = info.diff;
    const int count = static_cast<int>(info.field_names.size());
    EXPECT_LT(static_cast<int>(info.kind), kKindSlots) << info.name << ": the decoder refuses it";
    EXPECT_EQ(diff.volatile_mask >> count, 0u) << info.name << ": a volatile field past its fields";
    ASSERT_LE(diff.identity_count, kMaxIdentityFields) << info.name;
    std::set<int> identity;
    for (int i = 0; i < diff.identity_count; ++i) {
      EXPECT_LT(diff.identity[i], count) << info.name;
      EXPECT_TRUE(identity.insert(diff.identity[i]).second) << info.name << ": repeated";
      // A field that differs between identical runs would pair nothing across them.
      EXPECT_FALSE(diff.is_volatile(diff.identity[i])) << info.name << ": volatile identity";
    }
    std::string_view text = diff.short_text;
    for (size_t pos = text.find('{'); pos != std::string_view::npos; pos = text.find('{', pos)) {
      size_t close = text.find('}', pos);
      ASSERT_NE(close, std::string_view::npos) << info.name << ": " << text;
      std::string_view field = text.substr(pos + 1, close - pos - 1);
      EXPECT_NE(std::find(info.field_names.begin(), info.field_names.end(), field),
                info.field_names.end())
          << info.name << ": short text names '" << field << "'";
      pos = close;
    }
    // An ignored kind is never paired nor printed by the diff: other columns would mislead.
    if (diff.ignored()) {
      EXPECT_EQ(diff.volatile_mask, 0u) << info.name;
      EXPECT_EQ(diff.identity_count, 0) << info.name;
      EXPECT_TRUE(diff.short_text.empty()) << info.name;
      EXPECT_FALSE(diff.guessed_regions()) << info.name;
    }
    // The diff's lookup table holds the same row.
    const KindDiff& fast = kind_diff(info.kind);
    EXPECT_EQ(fast.role, diff.role) << info.name;
    EXPECT_EQ(fast.regions, diff.regions) << info.name;
    EXPECT_EQ(fast.volatile_mask, diff.volatile_mask) << info.name;
    EXPECT_EQ(fast.identity_count, diff.identity_count) << info.name;
    EXPECT_EQ(fast.identity, diff.identity) << info.name;
    EXPECT_EQ(fast.short_text, diff.short_text) << info.name;
  }
}

// The rows as the diff has always treated them (tools/README.md, "How diff works").
TEST(RecordTable, DiffColumnsOfTheKnownKinds) {
  for (RecordKind kind : {RecordKind::Warning, RecordKind::StepSummary, RecordKind::Scope})
    EXPECT_TRUE(kind_diff(kind).ignored()) << record_kind_name(kind);
  for (RecordKind kind :
       {RecordKind::Kernel, RecordKind::Gemm, RecordKind::Collective, RecordKind::Memcpy,
        RecordKind::Memset, RecordKind::Metric, RecordKind::StepMarker, RecordKind::GraphLaunch})
    EXPECT_FALSE(kind_diff(kind).ignored()) << record_kind_name(kind);

  const KindDiff& kernel = kind_diff(RecordKind::Kernel);
  EXPECT_EQ(kernel.volatile_mask,
            (1u << fields::Kernel::args_digest) | (1u << fields::Kernel::capture_id));
  EXPECT_TRUE(kernel.guessed_regions());
  EXPECT_TRUE(kind_diff(RecordKind::GraphLaunch).guessed_regions());
  EXPECT_FALSE(kind_diff(RecordKind::Gemm).guessed_regions());
  EXPECT_FALSE(kind_diff(RecordKind::Collective).guessed_regions());
  EXPECT_FALSE(kind_diff(RecordKind::Memcpy).guessed_regions());

  const KindDiff& collective = kind_diff(RecordKind::Collective);
  ASSERT_EQ(collective.identity_count, 2);
  EXPECT_EQ(collective.identity[0], fields::Collective::comm_id);
  EXPECT_EQ(collective.identity[1], fields::Collective::comm_seq);
  EXPECT_EQ(kernel.identity_count, 0);
  EXPECT_EQ(kind_diff(RecordKind::Gemm).identity_count, 0);

  // A wire id outside the table (a newer writer) gets the defaults: compared, by occurrence.
  const KindDiff& unknown = kind_diff(static_cast<RecordKind>(200));
  EXPECT_FALSE(unknown.ignored());
  EXPECT_FALSE(unknown.guessed_regions());
  EXPECT_EQ(unknown.volatile_mask, 0u);
  EXPECT_EQ(unknown.identity_count, 0);
}

TEST(RecordTable, ShortTextReplacesFieldNamesWithValues) {
  Record r;
  r.fields[fields::Collective::comm_id] = 4;
  r.fields[fields::Collective::comm_seq] = 19;
  EXPECT_EQ(short_text(RecordKind::Collective, r.fields), "comm 4 #19");
  r.fields = {};
  r.fields[fields::Gemm::algo] = 7;
  // Values read as field_text prints them (field_formats.def); without the GEMM's API a number
  // stays a number, but "none given" reads as such.
  EXPECT_EQ(short_text(RecordKind::Gemm, r.fields), "algo 7");
  r.fields[fields::Gemm::algo] = UINT64_MAX;
  EXPECT_EQ(short_text(RecordKind::Gemm, r.fields), "algo default");
  EXPECT_EQ(short_text(RecordKind::Kernel, r.fields), "");
  EXPECT_EQ(short_text(static_cast<RecordKind>(200), r.fields), "");
  // Fewer values than fields (a table of another version): the missing ones read as 0.
  EXPECT_EQ(short_text(RecordKind::Collective, std::span<const uint64_t>(r.fields.data(), 1)),
            "comm 0 #0");
}

TEST(RecordTable, DTypes) {
  EXPECT_EQ(dtype_name(DType::BF16), "bf16");
  EXPECT_EQ(dtype_bits(DType::BF16), 16);
  EXPECT_EQ(dtype_bits(DType::FP4E2M1), 4);
  EXPECT_EQ(dtype_name(DType::FP8E4M3), "fp8_e4m3");
  EXPECT_EQ(dtype_bits(static_cast<DType>(250)), 0);
  EXPECT_EQ(dtype_name(static_cast<DType>(250)), "?");
}

// A record handed on (held for its digests) moves whole, and the one it came from keeps the
// other's vectors' capacity for the next call: no allocation on either side.
TEST(RecordMoves, TakeFromMovesEverythingAndLeavesEmptyVectorsWithCapacity) {
  Record from;
  from.kind = RecordKind::State;
  from.scope = 3, from.seq = 41, from.stream = 2, from.step = 7, from.thread = 1, from.name = 9;
  from.fields[fields::State::bytes] = 4096;
  from.fields[kMaxFields - 1] = 5;
  from.buffers.resize(2);
  from.buffers[1].fingerprint = 0xabc;
  from.payload = {1, 2, 3};
  const Record expected = from;
  Record to;
  to.buffers.resize(8);
  to.payload.resize(64);
  const BufferFingerprint* old_buffers = to.buffers.data();
  to.take_from(from);
  EXPECT_EQ(to, expected);
  EXPECT_TRUE(from.buffers.empty());
  EXPECT_TRUE(from.payload.empty());
  EXPECT_EQ(from.buffers.data(), old_buffers) << "the taker's vectors go back, emptied";
  EXPECT_GE(from.buffers.capacity(), 8u);
  EXPECT_GE(from.payload.capacity(), 64u);
}

}  // namespace
}  // namespace lockstep::trace
