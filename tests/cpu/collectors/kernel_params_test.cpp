#include <cstring>
#include <optional>

#include <cuda.h>
#include <gtest/gtest.h>

#include "collectors/kernel_params.h"

namespace lockstep::collectors {
namespace {

// A fake layout like void k(float* x, int n, Params p /* 24 bytes: ptr, double, ptr */, char c).
const std::vector<ParamInfo> kLayout = {{0, 8}, {8, 4}, {16, 24}, {40, 1}};

struct Args {
  uintptr_t x;
  int n;
  struct {
    uintptr_t a;
    double d;
    uintptr_t b;
  } p;
  char c;
};

std::vector<uint8_t> packed(const Args& args) {
  std::vector<uint8_t> buffer(41, 0);
  std::memcpy(&buffer[0], &args.x, 8);
  std::memcpy(&buffer[8], &args.n, 4);
  std::memcpy(&buffer[16], &args.p, 24);
  buffer[40] = static_cast<uint8_t>(args.c);
  return buffer;
}

TEST(KernelParams, BothLaunchFormsGiveTheSameBytes) {
  Args args{0x1000, 42, {0x2000, 3.5, 0x1234}, 'z'};
  void* kernel_params[] = {&args.x, &args.n, &args.p, &args.c};
  std::vector<uint8_t> from_params, from_extra;
  ASSERT_TRUE(gather_param_bytes(kLayout, kernel_params, nullptr, &from_params));
  std::vector<uint8_t> buffer = packed(args);
  size_t size = buffer.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  ASSERT_TRUE(gather_param_bytes(kLayout, nullptr, extra, &from_extra));
  EXPECT_EQ(from_params, buffer);
  EXPECT_EQ(from_extra, buffer);
}

TEST(KernelParams, ExtraWithoutBufferOrSizeFails) {
  std::vector<uint8_t> out;
  std::vector<uint8_t> buffer(8);
  void* no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_END};
  EXPECT_FALSE(gather_param_bytes(kLayout, nullptr, no_size, &out));
  EXPECT_FALSE(gather_param_bytes(kLayout, nullptr, nullptr, &out));
  EXPECT_TRUE(gather_param_bytes({}, nullptr, nullptr, &out));  // a kernel without parameters
}

// Fake allocation map: [0x1000, 0x3000) is allocation 1, [0x10000, 0x20000) allocation 2.
std::optional<AllocationHit> lookup(uintptr_t p) {
  if (p >= 0x1000 && p < 0x3000) return AllocationHit{1, p - 0x1000, 0x1000, 0x3000 - p};
  if (p >= 0x10000 && p < 0x20000) return AllocationHit{2, p - 0x10000, 0x10000, 0x20000 - p};
  return std::nullopt;
}

TEST(KernelParams, WordsOutsideTheCandidateRangeAreNotAskedAndDecodeTheSame) {
  Args args{0x1000, 42, {0x10040, 3.5, 0x1234}, 'z'};
  int asked = 0;
  const PointerLookup counted = [&](uintptr_t p) {
    ++asked;
    return lookup(p);
  };
  DecodedArgs everywhere, ranged;
  decode_args(kLayout, packed(args), counted, &everywhere);
  const int asked_everywhere = asked;
  asked = 0;
  decode_args(kLayout, packed(args), counted, &ranged, AddressRange{0x1000, 0x20000});
  // The words are x, p.a, 3.5's bits and p.b (n and c fill no aligned word): 3.5's bits lie
  // outside [0x1000, 0x20000), so only the three pointers are asked.
  EXPECT_EQ(asked_everywhere, 4);
  EXPECT_EQ(asked, 3);
  ASSERT_EQ(ranged.pointers.size(), everywhere.pointers.size());
  for (size_t i = 0; i < ranged.pointers.size(); ++i) {
    EXPECT_EQ(ranged.pointers[i].value, everywhere.pointers[i].value);
    EXPECT_EQ(ranged.pointers[i].byte_offset, everywhere.pointers[i].byte_offset);
  }
  EXPECT_EQ(ranged.scalar_digest, everywhere.scalar_digest);
}

TEST(KernelParams, PointersInAllocationsAreFoundInsideStructsToo) {
  Args args{0x1000, 42, {0x10040, 3.5, 0x1234}, 'z'};
  DecodedArgs d = decode_args(kLayout, packed(args), lookup);
  ASSERT_EQ(d.pointers.size(), 3u);  // x, p.a, p.b
  EXPECT_EQ(d.pointers[0].param, 0u);
  EXPECT_EQ(d.pointers[0].hit.ordinal, 1u);
  EXPECT_EQ(d.pointers[1].param, 2u);
  EXPECT_EQ(d.pointers[1].byte_offset, 16u);
  EXPECT_EQ(d.pointers[1].hit.ordinal, 2u);
  EXPECT_EQ(d.pointers[1].hit.offset, 0x40u);
  EXPECT_EQ(d.pointers[2].byte_offset, 32u);
  EXPECT_EQ(d.pointers[2].hit.offset, 0x234u);
}

TEST(KernelParams, DigestIgnoresPointerValuesButSeesScalars) {
  Args run1{0x1000, 42, {0x10040, 3.5, 0x1234}, 'z'};
  Args run2 = run1;  // same scalars, tensors at other addresses
  run2.x = 0x2000, run2.p.a = 0x18000;
  Args changed = run1;
  changed.p.d = 3.25;
  const uint64_t d1 = decode_args(kLayout, packed(run1), lookup).scalar_digest;
  EXPECT_EQ(d1, decode_args(kLayout, packed(run2), lookup).scalar_digest);
  EXPECT_NE(d1, decode_args(kLayout, packed(changed), lookup).scalar_digest);
  Args other_n = run1;
  other_n.n = 43;
  EXPECT_NE(d1, decode_args(kLayout, packed(other_n), lookup).scalar_digest);
  // A word that is not in any allocation is a scalar: it stays in the digest.
  Args stray = run1;
  stray.p.b = 0x99999999;
  EXPECT_NE(d1, decode_args(kLayout, packed(stray), lookup).scalar_digest);
}

}  // namespace
}  // namespace lockstep::collectors
