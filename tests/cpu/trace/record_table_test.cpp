#include <gtest/gtest.h>

#include "trace/record.h"

namespace lockstep::trace {
namespace {

TEST(RecordTable, KindsInIdOrderWithNamesAndFields) {
  const auto& kinds = record_kinds();
  ASSERT_EQ(kinds.size(), 10u);
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

TEST(RecordTable, DTypes) {
  EXPECT_EQ(dtype_name(DType::BF16), "bf16");
  EXPECT_EQ(dtype_bits(DType::BF16), 16);
  EXPECT_EQ(dtype_bits(DType::FP4E2M1), 4);
  EXPECT_EQ(dtype_name(DType::FP8E4M3), "fp8_e4m3");
  EXPECT_EQ(dtype_bits(static_cast<DType>(250)), 0);
  EXPECT_EQ(dtype_name(static_cast<DType>(250)), "?");
}

}  // namespace
}  // namespace lockstep::trace
