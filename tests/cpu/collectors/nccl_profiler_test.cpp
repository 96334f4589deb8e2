// NCCL's own choices reach the Collective records: the shim's profiler plugin entry points
// (interpose/nccl_profiler.cpp, compiled into this test) driven as NCCL 2.28 drives them (init
// per communicator, startEvent for each planned collective on the launching thread, inside the
// ncclAllReduce call or inside the outermost ncclGroupEnd, stopEvent, finalize), against the
// real collector. NCCL itself is not here: a stub is evidence of the mechanics only (the GPU
// rows of tests/gpu/test_g_ddp.py run the real NCCL).
#include <sys/wait.h>

#include "interpose/nccl_profiler_abi.h"
#include "tests/cpu/collectors/runtime_harness.h"

extern "C" const lockstep::interpose::nccl_profiler::PluginV5 ncclProfiler_v5;

namespace lockstep::collectors {
namespace {

namespace profiler = interpose::nccl_profiler;
using F = trace::fields::Collective;
constexpr uint64_t kTree = 1, kRing = 2, kLL = 1, kLL128 = 2, kSimple = 3;  // enum_names.def

const profiler::PluginV5& plugin() { return ncclProfiler_v5; }

ncclComm_t make_comm() {
  auto* comm = reinterpret_cast<ncclComm_t>(0xc0);
  NcclCommCreated created;
  created.api = "ncclCommInitRank";
  created.comm = comm;
  created.nranks = 4;
  created.rank = 1;
  nccl_comm_created(created);
  return comm;
}

NcclCall all_reduce(ncclComm_t comm, uintptr_t send, uintptr_t recv) {
  NcclCall call;
  call.op = NcclOp::AllReduce;
  call.api = "ncclAllReduce";
  call.send = reinterpret_cast<void*>(send);
  call.recv = reinterpret_cast<void*>(recv);
  call.count = 256;
  call.datatype = ncclFloat32;
  call.comm = comm;
  return call;
}

// What NCCL does for one planned collective: startEvent with its coll descriptor, then stopEvent
// on the handle it got back (never called for a null handle, as NCCL does).
void nccl_plans(void* context, const char* func, uintptr_t send, uintptr_t recv, const char* algo,
                const char* proto, uint8_t channels, uint64_t seq) {
  profiler::EventDescr d{};
  d.type = profiler::kColl;
  d.rank = 1;
  d.coll.seq_number = seq;
  d.coll.func = func;
  d.coll.send = reinterpret_cast<const void*>(send);
  d.coll.recv = reinterpret_cast<void*>(recv);
  d.coll.count = 256;
  d.coll.datatype = "ncclFloat32";
  d.coll.channels = channels;
  d.coll.warps = 16;
  d.coll.algo = algo;
  d.coll.proto = proto;
  void* handle = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(plugin().start_event(context, &handle, &d), ncclSuccess);
  if (handle != nullptr) plugin().stop_event(handle);
}

void* init_plugin() {
  void* context = nullptr;
  int mask = 0;
  EXPECT_EQ(plugin().init(&context, 0x1234, &mask, "", 1, 4, 1, nullptr), ncclSuccess);
  // Only collectives: no proxy, kernel or network events for NCCL's threads to make.
  if (mask != static_cast<int>(profiler::kColl)) std::_Exit(20);
  if (context == nullptr) std::_Exit(21);  // NCCL skips finalize for a null context
  return context;
}

class NcclProfilerTest : public RuntimeTest {
 protected:
  // The child's Collective records in seq order (its trace stays open in *reader).
  std::vector<trace::Record> collectives(const ChildResult& child,
                                         std::unique_ptr<trace::TraceReader>* reader) const {
    *reader = only_trace(child);
    if (!*reader) return {};
    return records_of_kind(**reader, trace::RecordKind::Collective);
  }
};

TEST_F(NcclProfilerTest, TheProfilerIsNamedAndEveryEntryPointAnswersSuccess) {
  EXPECT_STREQ(plugin().name, "lockstep");
  EXPECT_EQ(plugin().stop_event(nullptr), ncclSuccess);
  EXPECT_EQ(plugin().record_event_state(nullptr, 0, nullptr), ncclSuccess);
  EXPECT_EQ(plugin().finalize(nullptr), ncclSuccess);
  // Another event type (a proxy step) is not a choice, and its handle stays null.
  profiler::EventDescr d{};
  d.type = profiler::kProxyStep;
  void* handle = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(plugin().start_event(nullptr, &handle, &d), ncclSuccess);
  EXPECT_EQ(handle, nullptr);
}

TEST_F(NcclProfilerTest, AnUngroupedAllReduceRecordsTheAlgorithmProtocolAndChannelsNcclChose) {
  for (const std::string level : {"broad", "full"}) {
    fs::remove_all(dir_);  // one trace per child
    ChildResult child = run_child(env(level), [] {
      on_alloc(0x7f0000000000, 1 << 20);
      ncclComm_t comm = make_comm();
      void* context = init_plugin();
      const uint64_t token = nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000));
      // Inside the real ncclAllReduce: NCCL plans it and tells its profiler.
      nccl_plans(context, "AllReduce", 0x7f0000001000, 0x7f0000002000, "Ring", "LL128", 4, 0);
      nccl_end(token, ncclSuccess);
      // The next one without a choice (a job whose CUDA graphs moved NCCL's planning to a
      // callback thread): nothing recorded, not the previous call's choice.
      nccl_end(nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000)), ncclSuccess);
      plugin().finalize(context);
    });
    std::unique_ptr<trace::TraceReader> reader;
    auto records = collectives(child, &reader);
    ASSERT_EQ(records.size(), 2u) << level << child.stderr_text;
    EXPECT_EQ(records[0].fields[F::nccl_algo], kRing) << level;
    EXPECT_EQ(records[0].fields[F::nccl_proto], kLL128) << level;
    EXPECT_EQ(records[0].fields[F::nccl_channels], 4u) << level;
    EXPECT_EQ(records[1].fields[F::nccl_algo], 0u) << level;
    EXPECT_EQ(records[1].fields[F::nccl_proto], 0u) << level;
    EXPECT_EQ(records[1].fields[F::nccl_channels], 0u) << level;
  }
}

TEST_F(NcclProfilerTest, GroupedCollectivesTakeTheirOwnChoicesWhateverOrderNcclPlansThemIn) {
  // full: records held for fingerprints; broad outside the step window: records held only for
  // NCCL's choices, which arrive when the group ends.
  for (const auto& [level, steps] :
       std::vector<std::pair<std::string, std::string>>{{"full", "0-"}, {"broad", "5-"}}) {
    fs::remove_all(dir_);  // one trace per child
    auto environment = env(level);
    environment["LOCKSTEP_STEPS"] = steps;
    ChildResult child = run_child(environment, [] {
      on_alloc(0x7f0000000000, 1 << 20);
      ncclComm_t comm = make_comm();
      void* context = init_plugin();
      nccl_group_start();
      nccl_end(nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000)), ncclSuccess);
      nccl_end(nccl_begin(all_reduce(comm, 0x7f0000003000, 0x7f0000004000)), ncclSuccess);
      // Inside the real ncclGroupEnd, in NCCL's order (it sorts its tasks), not the job's.
      nccl_plans(context, "AllReduce", 0x7f0000003000, 0x7f0000004000, "Tree", "Simple", 2, 0);
      nccl_plans(context, "AllReduce", 0x7f0000001000, 0x7f0000002000, "Ring", "LL", 8, 1);
      nccl_group_end(ncclSuccess);
      plugin().finalize(context);
    });
    std::unique_ptr<trace::TraceReader> reader;
    auto records = collectives(child, &reader);
    ASSERT_EQ(records.size(), 2u) << level << child.stderr_text;
    EXPECT_EQ(records[0].fields[F::nccl_algo], kRing) << level;
    EXPECT_EQ(records[0].fields[F::nccl_proto], kLL) << level;
    EXPECT_EQ(records[0].fields[F::nccl_channels], 8u) << level;
    EXPECT_EQ(records[1].fields[F::nccl_algo], kTree) << level;
    EXPECT_EQ(records[1].fields[F::nccl_proto], kSimple) << level;
    EXPECT_EQ(records[1].fields[F::nccl_channels], 2u) << level;
  }
}

TEST_F(NcclProfilerTest, AChoiceOutsideAnyTracedCallIsSaidOnceAndGivenToNoRecord) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(0x7f0000000000, 1 << 20);
    ncclComm_t comm = make_comm();
    void* context = init_plugin();
    nccl_end(nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000)), ncclSuccess);
    // NCCL's host-stream callback thread planning later (CUDA graphs of the communicator alive).
    std::thread([context] {
      nccl_plans(context, "AllReduce", 0x7f0000001000, 0x7f0000002000, "Ring", "LL", 8, 0);
      nccl_plans(context, "AllReduce", 0x7f0000001000, 0x7f0000002000, "Ring", "LL", 8, 1);
    }).join();
    nccl_end(nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000)), ncclSuccess);
  });
  std::unique_ptr<trace::TraceReader> reader;
  auto records = collectives(child, &reader);
  ASSERT_EQ(records.size(), 2u) << child.stderr_text;
  for (const auto& r : records) EXPECT_EQ(r.fields[F::nccl_algo], 0u);
  const std::string line = "planned a collective outside the call that made it";
  const size_t first = child.stderr_text.find(line);
  EXPECT_NE(first, std::string::npos) << child.stderr_text;
  EXPECT_EQ(child.stderr_text.find(line, first + 1), std::string::npos) << child.stderr_text;
}

TEST_F(NcclProfilerTest, AFailedCallsChoiceIsNotLeftForTheNextCall) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(0x7f0000000000, 1 << 20);
    ncclComm_t comm = make_comm();
    void* context = init_plugin();
    const uint64_t token = nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000));
    nccl_plans(context, "AllReduce", 0x7f0000001000, 0x7f0000002000, "Ring", "LL", 8, 0);
    nccl_end(token, ncclInvalidArgument);
    nccl_end(nccl_begin(all_reduce(comm, 0x7f0000001000, 0x7f0000002000)), ncclSuccess);
  });
  std::unique_ptr<trace::TraceReader> reader;
  auto records = collectives(child, &reader);
  // The failed call may be recorded (its fingerprints dropped); the next call is the last.
  ASSERT_FALSE(records.empty()) << child.stderr_text;
  EXPECT_EQ(records.back().fields[F::nccl_algo], 0u);
  EXPECT_EQ(records.back().fields[F::nccl_channels], 0u);
}

}  // namespace
}  // namespace lockstep::collectors
