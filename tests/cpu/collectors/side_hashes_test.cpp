// SideHashes (collectors/side_hashes.h) over a fake driver that logs its calls: what it does
// where the Tracer's runtime tests (tracer_side_hashes_test.cpp) cannot reach, a stream it cannot
// use and a join from another context's thread.
#include "collectors/side_hashes.h"

#include <gtest/gtest.h>

#include <string>

namespace lockstep::collectors {
namespace {

std::string g_log;
bool g_fail_stream_create = false;
CUcontext g_current = reinterpret_cast<CUcontext>(0x10);
uintptr_t g_next_handle = 0x100;

CUresult stream_create(CUstream* s, unsigned) {
  g_log += "create ";
  if (g_fail_stream_create) return CUDA_ERROR_OUT_OF_MEMORY;
  *s = reinterpret_cast<CUstream>(g_next_handle++);
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(g_next_handle++);
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent, CUstream) {
  g_log += "record ";
  return CUDA_SUCCESS;
}
CUresult stream_wait_event(CUstream s, CUevent, unsigned) {
  g_log += "wait@" + std::to_string(reinterpret_cast<uintptr_t>(s)) + " ";
  return CUDA_SUCCESS;
}
CUresult ctx_get_current(CUcontext* ctx) {
  *ctx = g_current;
  return CUDA_SUCCESS;
}
CUresult ctx_push(CUcontext ctx) {
  g_log += "push@" + std::to_string(reinterpret_cast<uintptr_t>(ctx)) + " ";
  return CUDA_SUCCESS;
}
CUresult ctx_pop(CUcontext* ctx) {
  g_log += "pop ";
  *ctx = nullptr;
  return CUDA_SUCCESS;
}

Driver fake_driver() {
  Driver d;
  d.streamCreate = &stream_create;
  d.eventCreate = &event_create;
  d.eventRecord = &event_record;
  d.streamWaitEvent = &stream_wait_event;
  d.ctxGetCurrent = &ctx_get_current;
  d.ctxPushCurrent = &ctx_push;
  d.ctxPopCurrent = &ctx_pop;
  return d;
}

class SideHashesUnit : public ::testing::Test {
 protected:
  void SetUp() override {
    g_log.clear();
    g_fail_stream_create = false;
    g_current = kCtx;
  }
  const CUcontext kCtx = reinterpret_cast<CUcontext>(0x10);
  const CUstream kJob = reinterpret_cast<CUstream>(0x51);
};

TEST_F(SideHashesUnit, ThePerThreadDefaultStreamGetsNoSideStream) {
  SideHashes side(fake_driver());
  EXPECT_EQ(side.begin(kCtx, CU_STREAM_PER_THREAD), nullptr);
  EXPECT_EQ(g_log, "");
}

TEST_F(SideHashesUnit, AStreamWhoseSideStreamCouldNotBeMadeStaysInStreamWithoutRetrying) {
  g_fail_stream_create = true;
  SideHashes side(fake_driver());
  EXPECT_EQ(side.begin(kCtx, kJob), nullptr);
  g_fail_stream_create = false;
  EXPECT_EQ(side.begin(kCtx, kJob), nullptr);
  EXPECT_EQ(g_log, "create ");
  EXPECT_EQ(side.stats().failures, 1u);
}

TEST_F(SideHashesUnit, ASetOfAnotherContextIsJoinedWithThatContextCurrent) {
  SideHashes side(fake_driver());
  const CUstream s = side.begin(kCtx, kJob);
  ASSERT_NE(s, nullptr);
  const std::pair<uint64_t, uint64_t> region{0x1000, 0x2000};
  side.end(kCtx, kJob, &region, 1, true);
  EXPECT_TRUE(side.pending());
  g_log.clear();
  g_current = reinterpret_cast<CUcontext>(0x20);  // a thread of another device
  side.join_all();
  EXPECT_EQ(g_log, "push@16 wait@81 pop ");
  EXPECT_FALSE(side.pending());
}

TEST_F(SideHashesUnit, AWriteBesideASetsRegionsWaitsForNothing) {
  SideHashes side(fake_driver());
  ASSERT_NE(side.begin(kCtx, kJob), nullptr);
  const std::pair<uint64_t, uint64_t> region{0x1000, 0x2000};
  side.end(kCtx, kJob, &region, 1, true);
  g_log.clear();
  const std::pair<uint64_t, uint64_t> beside{0x2000, 0x3000}, across{0x1fff, 0x2001};
  side.before_writes(kJob, &beside, 1);
  EXPECT_EQ(g_log, "");
  EXPECT_TRUE(side.pending());
  side.before_writes(kJob, &across, 1);
  EXPECT_EQ(g_log, "wait@81 ");
  EXPECT_FALSE(side.pending());  // its own job stream waited: done with
}

TEST_F(SideHashesUnit, ARefusedLaunchLeavesNothingPending) {
  SideHashes side(fake_driver());
  ASSERT_NE(side.begin(kCtx, kJob), nullptr);
  const std::pair<uint64_t, uint64_t> region{0x1000, 0x2000};
  side.end(kCtx, kJob, &region, 1, false);
  EXPECT_FALSE(side.pending());
  EXPECT_EQ(side.stats().launches, 0u);
}

}  // namespace
}  // namespace lockstep::collectors
