// Code unloaded while a job is traced (events.h, code_unloading; XLA's autotuner loads, runs and
// unloads candidate kernels): a broad launch's record, named later by the writer's thread, gets
// the name of the code it launched, not a crash and not the name of code loaded later at the
// same handle; a later launch of that handle is described again; other code's descriptions stay.
#include <thread>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// A driver whose function kReused belongs to module kFirst until that module is unloaded; then
// the driver hands the same handle out for a function of module kSecond (a new load at the same
// address). kOther, of module kOtherModule, stays. Asking for the name of kReused between the
// unload and the new load is what crashed the job (the driver read freed memory): counted.
const CUfunction kReused = reinterpret_cast<CUfunction>(0x2000);
const CUfunction kOther = reinterpret_cast<CUfunction>(0x3000);
const CUmodule kFirst = reinterpret_cast<CUmodule>(0xa1), kSecond = reinterpret_cast<CUmodule>(0xa2),
               kOtherModule = reinterpret_cast<CUmodule>(0xa3);
// kFirst is this library's module in the current context (the runtime's lazy loading).
const CUlibrary kLibrary = reinterpret_cast<CUlibrary>(0xb1);
bool g_unload_library = false;  // the job unloads kLibrary, not kFirst itself
int g_loaded = 1;              // 1: kFirst holds kReused; 0: unloaded; 2: kSecond holds it
int g_stale_name_reads = 0;    // cuFuncGetName of kReused while unloaded
int g_other_described = 0;     // cuFuncGetName of kOther

CUresult unload_get_name(const char** name, CUfunction f) {
  if (f == kOther) {
    ++g_other_described;
    *name = "_Z5otherv";
    return CUDA_SUCCESS;
  }
  if (g_loaded == 0) ++g_stale_name_reads;
  *name = g_loaded == 2 ? "_Z6secondv" : g_loaded == 1 ? "_Z5firstv" : "freed";
  return CUDA_SUCCESS;
}
CUresult unload_get_module(CUmodule* module, CUfunction f) {
  *module = f == kOther ? kOtherModule : g_loaded == 2 ? kSecond : kFirst;
  return CUDA_SUCCESS;
}
CUresult unload_library_module(CUmodule* module, CUlibrary library) {
  if (library != kLibrary) return CUDA_ERROR_INVALID_HANDLE;
  *module = kFirst;
  return CUDA_SUCCESS;
}
CUresult no_params(CUfunction, size_t, size_t*, size_t*) { return CUDA_ERROR_INVALID_VALUE; }

CUresult unload_get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult* status) {
  const std::string s = symbol;
  *pfn = s == "cuFuncGetName"        ? reinterpret_cast<void*>(&unload_get_name)
         : s == "cuFuncGetModule"    ? reinterpret_cast<void*>(&unload_get_module)
         : s == "cuFuncGetParamInfo" ? reinterpret_cast<void*>(&no_params)
         : s == "cuLibraryGetModule" ? reinterpret_cast<void*>(&unload_library_module)
                                     : nullptr;
  if (*pfn != nullptr) {
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  return fake_get_proc_address(symbol, pfn, version, flags, status);
}
void* unload_resolver(const char* name) {
  if (std::string(name) == "cuGetProcAddress_v2")
    return reinterpret_cast<void*>(&unload_get_proc_address);
  return fake_resolver(name);
}

// After the trace is closed (registered before the first launch makes the tracer, whose own
// handler runs first): no name read of unloaded code, kOther described once.
void check_driver_reads() {
  if (g_stale_name_reads != 0 || g_other_described != 1) {
    std::fprintf(stderr, "stale name reads %d, kOther described %d times\n", g_stale_name_reads,
                 g_other_described);
    std::_Exit(3);
  }
}

// The job: kOther and kReused launched; module kFirst unloaded (the hook reports it first, then
// the driver unloads); kSecond loaded, its kReused launched; kOther launched again.
void launch_unload_launch() {
  std::atexit(check_driver_reads);
  launch_function(kOther, nullptr, nullptr, 1);
  launch_function(kReused, nullptr, nullptr, 1);
  launch_function(kReused, nullptr, nullptr, 2);
  if (g_unload_library)
    code_unloading(nullptr, kLibrary);
  else
    code_unloading(kFirst, nullptr);
  g_loaded = 0;  // the driver's unload
  g_loaded = 2;  // a new load at the same handle
  launch_function(kReused, nullptr, nullptr, 3);
  launch_function(kOther, nullptr, nullptr, 4);
}

// grid_x -> name of the kernel records of a trace.
std::map<unsigned, std::string> names_by_grid(trace::TraceReader& reader) {
  std::map<unsigned, std::string> names;
  for (const trace::Record& r : records_of_kind(reader, trace::RecordKind::Kernel))
    names[static_cast<unsigned>(r.fields[trace::fields::Kernel::grid_x])] =
        std::string(reader.string(r.name));
  return names;
}

class CodeUnload : public RuntimeTest {
 protected:
  // launch_unload_launch at `level`: each launch named after the code it ran.
  void expect_each_launch_named_after_its_code(const std::string& level) {
    ChildResult child = run_child(env(level), launch_unload_launch, &unload_resolver);
    auto reader = only_trace(child);
    ASSERT_TRUE(reader);
    const std::map<unsigned, std::string> want = {
        {1, "first()"}, {2, "first()"}, {3, "second()"}, {4, "other()"}};
    EXPECT_EQ(names_by_grid(*reader), want);
  }
};

TEST_F(CodeUnload, ABroadLaunchIsNamedAfterTheCodeItRanNotTheCodeLoadedLaterAtItsHandle) {
  // Broad: the records are staged with their names left to the writer's thread, which names them
  // at exit here; the unload names the first two while kFirst is still loaded.
  expect_each_launch_named_after_its_code("broad");
}

TEST_F(CodeUnload, AtFullAnUnloadedHandleIsDescribedAgainAndOtherCodeIsNot) {
  // Full: named at the launch, through the caches the unload drops for kFirst's functions only.
  expect_each_launch_named_after_its_code("full");
}

TEST_F(CodeUnload, UnloadingALibraryDropsWhatIsKnownOfItsModulesFunctions) {
  // A CUfunction of a library's module (what cudaGetFuncBySymbol gives under lazy loading):
  // the library's unload drops it as the module's would.
  g_unload_library = true;
  expect_each_launch_named_after_its_code("full");
  g_unload_library = false;
}

// Another thread launches kOther while this one unloads other code again and again: each unload
// names the launcher's committed records while the launcher keeps committing and the writer's
// thread keeps draining. Neither hangs, no record is lost or misnamed, kOther is described once.
// (With the unload's drain not holding the thread's encoding lock, 1 of 50 repeats failed here.)
TEST_F(CodeUnload, UnloadsWhileAnotherThreadLaunchesNeitherHangNorLoseRecords) {
  constexpr unsigned kLaunches = 100000;
  ChildResult child = run_child(
      env("broad"),
      [] {
        std::atexit(check_driver_reads);
        launch_function(kOther, nullptr, nullptr, 4);  // the tracer made, kOther described
        std::atomic<bool> done{false};
        std::thread launcher([&done] {
          for (unsigned i = 1; i < kLaunches; ++i) launch_function(kOther, nullptr, nullptr, 4);
          done.store(true);
        });
        const CUmodule unrelated = reinterpret_cast<CUmodule>(0xa9);
        while (!done.load()) code_unloading(unrelated, nullptr);  // for as long as it launches
        launcher.join();
      },
      &unload_resolver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::vector<trace::Record> kernels = records_of_kind(*reader, trace::RecordKind::Kernel);
  EXPECT_EQ(kernels.size(), kLaunches);
  size_t misnamed = 0;
  for (const trace::Record& r : kernels) misnamed += reader->string(r.name) != "other()";
  EXPECT_EQ(misnamed, 0u);
}

}  // namespace
}  // namespace lockstep::collectors
