// LOCKSTEP_REPLAY's value and `lockstep replay --op`: one op by identity.
#include <gtest/gtest.h>

#include "common/op_spec.h"
#include "common/settings.h"

namespace lockstep::settings {
namespace {

TEST(OpSpec, ANameWithColonsIsSplitFromBothEnds) {
  const auto op = parse_op_spec("7:1:kernel:at::native::indexFuncLargeIndex<float, 2>(int):3");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->step, 7u);
  EXPECT_EQ(op->stream, 1u);
  EXPECT_EQ(op->kind, "kernel");
  EXPECT_EQ(op->name, "at::native::indexFuncLargeIndex<float, 2>(int)");
  EXPECT_EQ(op->occurrence, 3u);
}

TEST(OpSpec, ItsTextParsesBackToTheSameOp) {
  const OpSpec op{4, 2, "kernel", "a::b(c)", 12};
  EXPECT_EQ(op_spec_text(op), "4:2:kernel:a::b(c):12");
  EXPECT_EQ(parse_op_spec(op_spec_text(op)), op);
}

TEST(OpSpec, MalformedTextIsRefused) {
  for (const char* bad : {"", "7:1:kernel:name", "7:1:kernel::1", "x:1:kernel:k:1",
                          "7:1:kernel:k:0", "7:1:Kernel:k:1", "7:1::k:1", "7:-1:kernel:k:1",
                          "7:1:kernel:k:1x", "99999999999:1:kernel:k:1"})
    EXPECT_FALSE(parse_op_spec(bad)) << bad;
}

TEST(OpSpec, TheReplaySettingsSayWhatTheyAccept) {
  const Setting& replay = *find("LOCKSTEP_REPLAY");
  EXPECT_FALSE(problem(replay, "3:1:kernel:k(float*):1"));
  ASSERT_TRUE(problem(replay, "3:kernel:k"));
  EXPECT_NE(problem(replay, "3:kernel:k")->find("STEP:STREAM:KIND:NAME:OCCURRENCE"),
            std::string::npos);
  const Setting& replays = *find("LOCKSTEP_REPLAYS");
  EXPECT_FALSE(problem(replays, "16"));
  EXPECT_FALSE(problem(replays, "256"));
  for (const char* bad : {"0", "257", "", "4k", "-1"}) {
    ASSERT_TRUE(problem(replays, bad)) << bad;
    EXPECT_EQ(*problem(replays, bad), "is not a whole number from 1 to 256") << bad;
  }
}

}  // namespace
}  // namespace lockstep::settings
