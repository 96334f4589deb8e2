// Recalled fill digests (collectors/fill_digests.h): a fill's output digest comes from an earlier
// fill of the same value, element size and length, once that one's digest arrived; every 16th
// fill of a kind is hashed all the same; a kind whose digest differed is never recalled again.
#include "collectors/fill_digests.h"

#include <gtest/gtest.h>

namespace lockstep::collectors {
namespace {

FillKind kind_of(uint8_t value, uint32_t element_bytes, uint64_t bytes) {
  FillKind kind;
  kind.value[0] = value;
  kind.element_bytes = element_bytes;
  kind.bytes = bytes;
  return kind;
}

TEST(FillDigests, AKindIsRecalledOnceItsDigestArrived) {
  FillDigests fills;
  const FillKind nan4k = kind_of(0x7f, 4, 4096);
  EXPECT_FALSE(fills.recall(nan4k).has_value());  // first: hashed
  EXPECT_FALSE(fills.recall(nan4k).has_value());  // its digest has not arrived: hashed too
  EXPECT_TRUE(fills.learn(nan4k, 0xabc));
  EXPECT_TRUE(fills.learn(nan4k, 0xabc));  // the second one's, the same
  EXPECT_EQ(fills.recall(nan4k), 0xabcu);
  // Another value, element size or length is another kind.
  EXPECT_FALSE(fills.recall(kind_of(0x00, 4, 4096)).has_value());
  EXPECT_FALSE(fills.recall(kind_of(0x7f, 2, 4096)).has_value());
  EXPECT_FALSE(fills.recall(kind_of(0x7f, 4, 8192)).has_value());
  EXPECT_EQ(fills.recall(nan4k), 0xabcu);
  // A digest taught for a kind never looked up is not followed.
  EXPECT_TRUE(fills.learn(kind_of(0x01, 1, 1), 5));
  EXPECT_FALSE(fills.recall(kind_of(0x01, 1, 1)).has_value());
}

TEST(FillDigests, EverySixteenthFillIsHashedAndADifferenceEndsRecalling) {
  FillDigests fills;
  const FillKind kind = kind_of(0x7f, 4, 4096);
  ASSERT_FALSE(fills.recall(kind).has_value());  // fill 1
  ASSERT_TRUE(fills.learn(kind, 7));
  int recalled = 0, hashed = 0;
  for (int fill = 2; fill <= 48; ++fill) (fills.recall(kind) ? recalled : hashed)++;
  EXPECT_EQ(hashed, 3);  // fills 16, 32, 48
  EXPECT_EQ(recalled, 44);
  EXPECT_TRUE(fills.learn(kind, 7));   // a verifying fill that agrees
  EXPECT_FALSE(fills.learn(kind, 8));  // one that does not
  EXPECT_TRUE(fills.learn(kind, 9));   // reported once
  for (int fill = 0; fill < 40; ++fill) EXPECT_FALSE(fills.recall(kind).has_value());
}

}  // namespace
}  // namespace lockstep::collectors
