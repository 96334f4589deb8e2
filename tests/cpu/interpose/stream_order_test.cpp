// Stream order points: every driver call by which the job waits on a stream's queue reports
// collectors::stream_order_point() (the host's own waits and queries: stream_host_wait_begin) before
// the real call runs, forwards its arguments unchanged and returns the real result; reached by
// symbol and through cuGetProcAddress for each exact ABI version and per-thread variant.
#include <cstdint>
#include <string>

#include "fake_driver_shim.h"

using namespace interpose_test;

namespace {

// Distinct handles, so that the stubs' argument records show each one arrived in its place.
template <typename T>
T fake(uintptr_t value) {
  return reinterpret_cast<T>(value);
}
const CUstream kStream = fake<CUstream>(0x5a);
const CUevent kEvent = fake<CUevent>(0x3e);
const CUcontext kContext = fake<CUcontext>(0xc7);
const CUgraph kGraph = fake<CUgraph>(0x6a);
const CUgraphNode* const kDeps = fake<const CUgraphNode*>(0x700);
const CUgraphEdgeData* const kEdgeData = fake<const CUgraphEdgeData*>(0x710);
const CUhostFn kHostFn = fake<CUhostFn>(0x800);
const CUstreamCallback kCallback = fake<CUstreamCallback>(0x900);
void* const kUserData = fake<void*>(0xda);

// How to call one ABI, and what the stub must have received.
struct Abi {
  CUresult (*call)(void* fn);
  const char* args;
};

const Abi kRecord = {
    [](void* fn) { return reinterpret_cast<PFN_cuEventRecord_v2000>(fn)(kEvent, kStream); },
    "event=0x3e stream=0x5a"};
const Abi kRecordWithFlags = {[](void* fn) {
                                return reinterpret_cast<PFN_cuEventRecordWithFlags_v11010>(fn)(
                                    kEvent, kStream, CU_EVENT_RECORD_EXTERNAL);
                              },
                              "event=0x3e stream=0x5a flags=1"};
const Abi kStreamOnly = {
    [](void* fn) { return reinterpret_cast<CUresult (*)(CUstream)>(fn)(kStream); }, "stream=0x5a"};
const Abi kNoArgs = {[](void* fn) { return reinterpret_cast<CUresult (*)()>(fn)(); }, ""};
const Abi kContextArg = {
    [](void* fn) { return reinterpret_cast<PFN_cuCtxSynchronize_v13000>(fn)(kContext); },
    "ctx=0xc7"};
const Abi kCaptureMode = {[](void* fn) {
                            return reinterpret_cast<PFN_cuStreamBeginCapture_v10010>(fn)(
                                kStream, CU_STREAM_CAPTURE_MODE_RELAXED);
                          },
                          "stream=0x5a mode=2"};
const Abi kCaptureToGraph = {[](void* fn) {
                               return reinterpret_cast<PFN_cuStreamBeginCaptureToGraph_v12030>(fn)(
                                   kStream, kGraph, kDeps, kEdgeData, 2,
                                   CU_STREAM_CAPTURE_MODE_RELAXED);
                             },
                             "stream=0x5a graph=0x6a deps=0x700 data=0x710 n=2 mode=2"};
const Abi kHostFunc = {[](void* fn) {
                         return reinterpret_cast<PFN_cuLaunchHostFunc_v10000>(fn)(kStream, kHostFn,
                                                                                  kUserData);
                       },
                       "stream=0x5a fn=0x800 data=0xda"};
const Abi kAddCallback = {[](void* fn) {
                            return reinterpret_cast<PFN_cuStreamAddCallback_v5000>(fn)(
                                kStream, kCallback, kUserData, 0);
                          },
                          "stream=0x5a callback=0x900 data=0xda flags=0"};

struct Exported {
  const char* name;
  const Abi* abi;
};
const Exported kExported[] = {
    {"cuEventRecord", &kRecord},
    {"cuEventRecord_ptsz", &kRecord},
    {"cuEventRecordWithFlags", &kRecordWithFlags},
    {"cuEventRecordWithFlags_ptsz", &kRecordWithFlags},
    {"cuStreamSynchronize", &kStreamOnly},
    {"cuStreamSynchronize_ptsz", &kStreamOnly},
    {"cuStreamQuery", &kStreamOnly},
    {"cuStreamQuery_ptsz", &kStreamOnly},
    {"cuCtxSynchronize", &kNoArgs},
    {"cuCtxSynchronize_v2", &kContextArg},
    {"cuStreamBeginCapture", &kStreamOnly},
    {"cuStreamBeginCapture_ptsz", &kStreamOnly},
    {"cuStreamBeginCapture_v2", &kCaptureMode},
    {"cuStreamBeginCapture_v2_ptsz", &kCaptureMode},
    {"cuStreamBeginCaptureToGraph", &kCaptureToGraph},
    {"cuStreamBeginCaptureToGraph_ptsz", &kCaptureToGraph},
    {"cuLaunchHostFunc", &kHostFunc},
    {"cuLaunchHostFunc_ptsz", &kHostFunc},
    {"cuStreamAddCallback", &kAddCallback},
    {"cuStreamAddCallback_ptsz", &kAddCallback},
    {"cuStreamDestroy_v2", &kStreamOnly},
};

// A cuGetProcAddress query and the exported variant (hence ABI) it must give.
struct Lookup {
  const char* base;
  int version;
  bool per_thread;
  const char* expected;
  const Abi* abi;
};
const Lookup kLookups[] = {
    {"cuEventRecord", 12000, false, "cuEventRecord", &kRecord},
    {"cuEventRecord", 12000, true, "cuEventRecord_ptsz", &kRecord},
    {"cuEventRecordWithFlags", 13000, false, "cuEventRecordWithFlags", &kRecordWithFlags},
    {"cuEventRecordWithFlags", 13000, true, "cuEventRecordWithFlags_ptsz", &kRecordWithFlags},
    {"cuStreamSynchronize", 13000, false, "cuStreamSynchronize", &kStreamOnly},
    {"cuStreamSynchronize", 13000, true, "cuStreamSynchronize_ptsz", &kStreamOnly},
    {"cuStreamQuery", 13000, false, "cuStreamQuery", &kStreamOnly},
    {"cuStreamQuery", 13000, true, "cuStreamQuery_ptsz", &kStreamOnly},
    // CUDA 13 changed the ABI: a 13000 lookup must get the one-argument wrapper.
    {"cuCtxSynchronize", 12090, false, "cuCtxSynchronize", &kNoArgs},
    {"cuCtxSynchronize", 13000, false, "cuCtxSynchronize_v2", &kContextArg},
    {"cuCtxSynchronize", 13000, true, "cuCtxSynchronize_v2", &kContextArg},  // no per-thread one
    {"cuStreamBeginCapture", 10000, false, "cuStreamBeginCapture", &kStreamOnly},
    {"cuStreamBeginCapture", 10000, true, "cuStreamBeginCapture_ptsz", &kStreamOnly},
    {"cuStreamBeginCapture", 10010, false, "cuStreamBeginCapture_v2", &kCaptureMode},
    {"cuStreamBeginCapture", 13000, true, "cuStreamBeginCapture_v2_ptsz", &kCaptureMode},
    {"cuStreamBeginCaptureToGraph", 12030, false, "cuStreamBeginCaptureToGraph", &kCaptureToGraph},
    {"cuStreamBeginCaptureToGraph", 13000, true, "cuStreamBeginCaptureToGraph_ptsz",
     &kCaptureToGraph},
    {"cuLaunchHostFunc", 13000, false, "cuLaunchHostFunc", &kHostFunc},
    {"cuLaunchHostFunc", 13000, true, "cuLaunchHostFunc_ptsz", &kHostFunc},
    {"cuStreamAddCallback", 13000, false, "cuStreamAddCallback", &kAddCallback},
    {"cuStreamAddCallback", 6050, true, "cuStreamAddCallback", &kAddCallback},  // before ptsz
    {"cuStreamAddCallback", 13000, true, "cuStreamAddCallback_ptsz", &kAddCallback},
    {"cuStreamDestroy", 13000, false, "cuStreamDestroy_v2", &kStreamOnly},
    {"cuStreamDestroy", 13000, true, "cuStreamDestroy_v2", &kStreamOnly},  // no per-thread one
};

// Not CUDA_SUCCESS and not what a wrapper returns when it finds nothing to forward to.
constexpr CUresult kRealResult = CUDA_ERROR_NOT_READY;

class StreamOrderPoints : public FakeDriverShim {
 protected:
  void SetUp() override {
    FakeDriverShim::SetUp();
    if (HasFatalFailure()) return;
    last_args_ = symbol<const char* (*)(const char*)>(driver_, "fakecuda_last_args");
    order_points_before_ = symbol<int (*)(const char*)>(driver_, "fakecuda_order_points_before");
    auto set_result = symbol<void (*)(int)>(driver_, "fakecuda_set_order_result");
    ASSERT_TRUE(last_args_ && order_points_before_ && set_result);
    set_result(kRealResult);
  }

  // Calls `fn` (expected to be the wrapper of `name`) once, with the log cleared, and checks
  // that exactly one order point was reported (and a capture begin for the capture begins),
  // before the real function ran, which got the arguments and whose result came back.
  void expect_order_point_then_real(void* fn, const char* name, const Abi& abi,
                                    const std::string& context) {
    SCOPED_TRACE(context);
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, name)) << "not the shim's wrapper of " << name;
    const int calls_before = calls_(name);
    clear_fake_log();
    EXPECT_EQ(abi.call(fn), kRealResult);
    EXPECT_EQ(calls_(name), calls_before + 1) << "the real " << name << " did not run once";
    EXPECT_EQ(order_points_before_(name), 1) << "order point not reported before the real call";
    // The host's waits and queries are order points of their own kind (deferred hashes stay
    // held across them: collectors::stream_host_wait_begin).
    const std::string called = name;
    const bool host_wait = called.find("Synchronize") != std::string::npos ||
                           called.find("Query") != std::string::npos;
    EXPECT_EQ(lines_starting(fake_log(), "order_point").size(), host_wait ? 0u : 1u) << fake_log();
    EXPECT_EQ(lines_starting(fake_log(), "host_wait").size(), host_wait ? 1u : 0u) << fake_log();
    // Capture begins are noted as such too (kernel records query capture state after the first).
    const size_t capture_notes = std::string(name).find("BeginCapture") != std::string::npos;
    EXPECT_EQ(lines_starting(fake_log(), "capture_begins").size(), capture_notes) << fake_log();
    EXPECT_STREQ(last_args_(name), abi.args);
  }

  void* lookup(const char* base, int version, bool per_thread) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status = static_cast<CUdriverProcAddressQueryResult>(99);
    const cuuint64_t flags =
        per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    EXPECT_EQ(get_proc_(base, &p, version, flags, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
    return p;
  }

  const char* (*last_args_)(const char*) = nullptr;
  int (*order_points_before_)(const char*) = nullptr;
};

// cuMemFreeAsync: the collectors see every free first; one they take over returns success
// without reaching the driver (they free it later), any other is forwarded with its result.
TEST_F(StreamOrderPoints, StreamOrderedFreesTheCollectorsTakeOverSkipTheDriver) {
  for (const char* name : {"cuMemFreeAsync", "cuMemFreeAsync_ptsz"}) {
    SCOPED_TRACE(name);
    const bool ptsz = std::string(name).ends_with("_ptsz");
    auto fn = reinterpret_cast<PFN_cuMemFreeAsync_v11020>(dlsym(driver_, name));
    ASSERT_NE(fn, nullptr);
    auto via_proc =
        reinterpret_cast<PFN_cuMemFreeAsync_v11020>(lookup("cuMemFreeAsync", 13000, ptsz));
    EXPECT_EQ(reinterpret_cast<void*>(via_proc), dlsym(RTLD_DEFAULT, name));
    const int before = calls_(name);
    clear_fake_log();
    EXPECT_EQ(fn(0x7f00defe0000ull, kStream), CUDA_SUCCESS);
    EXPECT_EQ(calls_(name), before) << "a taken-over free reached the driver";
    EXPECT_EQ(lines_starting(fake_log(), "stream_free 0x7f00defe0000 stream=0x5a per_thread=" +
                                             std::to_string(ptsz ? 1 : 0))
                  .size(),
              1u)
        << fake_log();
    EXPECT_EQ(via_proc(0x7f0012340000ull, kStream), kRealResult);
    EXPECT_EQ(calls_(name), before + 1);
    EXPECT_STREQ(last_args_(name), "ptr=0x7f0012340000 stream=0x5a");
  }
}

TEST_F(StreamOrderPoints, EachExportedVariantReportsBeforeTheRealCall) {
  for (const Exported& e : kExported) {
    expect_order_point_then_real(dlsym(driver_, e.name), e.name, *e.abi,
                                 std::string("dlsym ") + e.name);
  }
}

TEST_F(StreamOrderPoints, GetProcAddressHandsOutTheWrapperOfTheExactVariant) {
  for (const Lookup& l : kLookups) {
    const std::string context = std::string("cuGetProcAddress ") + l.base + " v" +
                                std::to_string(l.version) + (l.per_thread ? " per-thread" : "");
    expect_order_point_then_real(lookup(l.base, l.version, l.per_thread), l.expected, *l.abi,
                                 context);
  }
}

// Stream-ordered steps move a stream at its event records: each variant names its stream, and
// whether a null stream is the per-thread default one.
TEST_F(StreamOrderPoints, EventRecordsReportTheirStreamAndWhichDefaultStreamNullMeans) {
  for (const char* name : {"cuEventRecord", "cuEventRecord_ptsz", "cuEventRecordWithFlags",
                           "cuEventRecordWithFlags_ptsz"}) {
    SCOPED_TRACE(name);
    const bool ptsz = std::string(name).ends_with("_ptsz");
    const bool flags = std::string(name).find("WithFlags") != std::string::npos;
    clear_fake_log();
    EXPECT_EQ((flags ? kRecordWithFlags : kRecord).call(dlsym(driver_, name)), kRealResult);
    EXPECT_EQ(lines_starting(fake_log(), "event_recorded event=0x3e stream=0x5a per_thread=" +
                                             std::to_string(ptsz ? 1 : 0))
                  .size(),
              1u)
        << fake_log();
  }
  auto sync = reinterpret_cast<CUresult (*)(CUstream)>(dlsym(driver_, "cuStreamSynchronize"));
  clear_fake_log();
  sync(kStream);  // an order point, not an event record
  EXPECT_TRUE(lines_starting(fake_log(), "event_recorded").empty()) << fake_log();
}

// A stream waiting on an event takes the event's step (stream-ordered steps): each variant,
// by symbol and through cuGetProcAddress, names its stream and event, forwards them unchanged,
// and is no order point (nothing waits on the waiting stream's queue).
TEST_F(StreamOrderPoints, EventWaitsReportTheirStreamAndEventAndAreNoOrderPoints) {
  using Wait = PFN_cuStreamWaitEvent_v3020;
  for (const bool ptsz : {false, true}) {
    const char* name = ptsz ? "cuStreamWaitEvent_ptsz" : "cuStreamWaitEvent";
    for (void* fn : {dlsym(driver_, name), lookup("cuStreamWaitEvent", ptsz ? 7000 : 3020, ptsz)}) {
      SCOPED_TRACE(name);
      ASSERT_NE(fn, nullptr);
      clear_fake_log();
      const int before = calls_(name);
      EXPECT_EQ(reinterpret_cast<Wait>(fn)(kStream, kEvent, 0), kRealResult);
      EXPECT_EQ(calls_(name), before + 1);
      EXPECT_STREQ(last_args_(name), "stream=0x5a event=0x3e flags=0");
      EXPECT_EQ(lines_starting(fake_log(), std::string("event_waited stream=0x5a per_thread=") +
                                               (ptsz ? "1" : "0") + " event=0x3e")
                    .size(),
                1u)
          << fake_log();
      EXPECT_TRUE(lines_starting(fake_log(), "order_point").empty()) << fake_log();
    }
  }
}

TEST_F(StreamOrderPoints, InactiveCollectorsForwardWithoutOrderPoints) {
  setenv("LOCKSTEP_FAKE_INACTIVE", "1", 1);
  auto sync = reinterpret_cast<CUresult (*)(CUstream)>(dlsym(driver_, "cuStreamSynchronize"));
  ASSERT_NE(sync, nullptr);
  const CUresult result = sync(kStream);
  unsetenv("LOCKSTEP_FAKE_INACTIVE");
  EXPECT_EQ(result, kRealResult);
  EXPECT_EQ(calls_("cuStreamSynchronize"), 1);
  EXPECT_STREQ(last_args_("cuStreamSynchronize"), "stream=0x5a");
  EXPECT_TRUE(lines_starting(fake_log(), "order_point").empty()) << fake_log();
}

}  // namespace
