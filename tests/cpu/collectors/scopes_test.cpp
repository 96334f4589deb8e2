// Scopes in the runtime (collectors/scopes.cpp, nvtx_injection.cpp): every record carries the
// ranges open on its calling thread, nested, per thread, per NVTX domain; a step marker's range
// is no scope; each distinct stack is one Scope definition in the trace.
#include <nvtx3/nvToolsExt.h>

#include <set>
#include <thread>

#include "collectors/scopes.h"
#include "tests/cpu/collectors/runtime_harness.h"

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

namespace lockstep::collectors {
namespace {

// One Metric record named `name` (a small device-to-host copy: a record at every level).
void record(const char* name) {
  static float value = 0;
  MemoryOp copy;
  copy.api = name;
  copy.direction = 2;
  copy.src = reinterpret_cast<void*>(kMergeBase);
  copy.dst = &value;
  copy.bytes = 4;
  memory_op_end(memory_op_begin(copy), 0);
}

// Each Metric record's name -> its scope path joined by " / " ("" for none).
std::map<std::string, std::string> scopes_by_record(trace::TraceReader& reader) {
  std::map<std::string, std::string> out;
  reader.for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Metric) return true;
    std::string path;
    for (std::string_view name : reader.scope_path(r.scope))
      path += (path.empty() ? "" : " / ") + std::string(name);
    out[std::string(reader.string(r.name))] = path;
    return true;
  });
  return out;
}

size_t scope_definitions(trace::TraceReader& reader) {
  size_t count = 0;
  for (const trace::BlockInfo& block : reader.blocks())
    if (block.type == trace::BlockType::Scopes) count += block.record_count;
  return count;
}

TEST_F(RuntimeTest, EachRecordCarriesTheNestedRangesOpenWhenItWasMade) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(kMergeBase, 1 << 20);
    record("before");
    lockstep_scope_push("GPT (forward)");
    record("in model");
    lockstep_scope_push("blocks.1.mlp (forward)");
    record("in mlp");
    lockstep_scope_pop();
    record("back in model");
    lockstep_scope_pop();
    record("after");
    lockstep_scope_pop();  // a stray pop changes nothing
    record("after a stray pop");
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::map<std::string, std::string> expected = {
      {"before", ""},
      {"in model", "GPT (forward)"},
      {"in mlp", "GPT (forward) / blocks.1.mlp (forward)"},
      {"back in model", "GPT (forward)"},
      {"after", ""},
      {"after a stray pop", ""}};
  EXPECT_EQ(scopes_by_record(*reader), expected);
}

TEST_F(RuntimeTest, EveryThreadHasItsOwnStackOfRanges) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(kMergeBase, 1 << 20);
    lockstep_scope_push("main thread");
    record("main");
    std::thread autograd([] {
      record("autograd, no range yet");
      lockstep_scope_push("blocks.1.mlp (backward)");
      record("autograd");
      lockstep_scope_pop();
    });
    autograd.join();
    record("main again");
    lockstep_scope_pop();
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::map<std::string, std::string> expected = {{"main", "main thread"},
                                                       {"autograd, no range yet", ""},
                                                       {"autograd", "blocks.1.mlp (backward)"},
                                                       {"main again", "main thread"}};
  EXPECT_EQ(scopes_by_record(*reader), expected);
}

// The same stack met again (every step's forward) is the same scope: one definition each.
TEST_F(RuntimeTest, AStackMetAgainIsTheSameScopeDefinedOnce) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(kMergeBase, 1 << 20);
    for (int step = 0; step < 50; ++step) {
      lockstep_scope_push("GPT (forward)");
      for (const char* block : {"blocks.0 (forward)", "blocks.1 (forward)"}) {
        lockstep_scope_push(block);
        record("op");
        lockstep_scope_pop();
      }
      lockstep_scope_pop();
      lockstep_step();
    }
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  EXPECT_EQ(scope_definitions(*reader), 3u);
  std::set<trace::ScopeId> ids;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Metric) ids.insert(r.scope);
    return true;
  });
  EXPECT_EQ(ids.size(), 2u);
}

// ---- through NVTX: a fake of NVTX's export table, whose slots the injection fills -------------
struct FakeNvtx {
  NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE] = {};
  NvtxFunctionPointer* core_slots[NVTX_CBID_CORE_SIZE] = {};
  NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE] = {};
  NvtxFunctionPointer* core2_slots[NVTX_CBID_CORE2_SIZE] = {};
  NvtxExportTableCallbacks callbacks{};
};
FakeNvtx g_nvtx;

int fake_module_table(NvtxCallbackModule module, NvtxFunctionTable* table, unsigned int* size) {
  if (module == NVTX_CB_MODULE_CORE) {
    *table = g_nvtx.core_slots;
    *size = NVTX_CBID_CORE_SIZE;
    return 1;
  }
  if (module == NVTX_CB_MODULE_CORE2) {
    *table = g_nvtx.core2_slots;
    *size = NVTX_CBID_CORE2_SIZE;
    return 1;
  }
  return 0;
}
const void* fake_export_table(uint32_t id) {
  return id == NVTX_ETID_CALLBACKS ? &g_nvtx.callbacks : nullptr;
}

void inject_nvtx() {
  for (int i = 0; i < NVTX_CBID_CORE_SIZE; ++i) g_nvtx.core_slots[i] = &g_nvtx.core[i];
  for (int i = 0; i < NVTX_CBID_CORE2_SIZE; ++i) g_nvtx.core2_slots[i] = &g_nvtx.core2[i];
  g_nvtx.callbacks.struct_size = sizeof(g_nvtx.callbacks);
  g_nvtx.callbacks.GetModuleFunctionTable = fake_module_table;
  InitializeInjectionNvtx2(fake_export_table);
}
int nvtx_push(const char* text) {
  return reinterpret_cast<int (*)(const char*)>(g_nvtx.core[NVTX_CBID_CORE_RangePushA])(text);
}
int nvtx_pop() { return reinterpret_cast<int (*)()>(g_nvtx.core[NVTX_CBID_CORE_RangePop])(); }
int domain_push(nvtxDomainHandle_t domain, const char* text) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = text;
  return reinterpret_cast<int (*)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)>(
      g_nvtx.core2[NVTX_CBID_CORE2_DomainRangePushEx])(domain, &attributes);
}
int domain_pop(nvtxDomainHandle_t domain) {
  return reinterpret_cast<int (*)(nvtxDomainHandle_t)>(
      g_nvtx.core2[NVTX_CBID_CORE2_DomainRangePop])(domain);
}

TEST_F(RuntimeTest, NvtxRangesAreScopesAndAStepRangeKeepsItsParents) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(kMergeBase, 1 << 20);
    inject_nvtx();
    record("first");  // opens the trace
    nvtx_push("forward");
    nvtx_push("train_step");  // a step marker: the step advances, the scope stays "forward"
    record("in the step range");
    nvtx_push("attention");
    record("in attention");
    nvtx_pop();
    nvtx_pop();
    record("after the step range");
    nvtx_pop();
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::map<std::string, std::string> expected = {{"first", ""},
                                                       {"in the step range", "forward"},
                                                       {"in attention", "forward / attention"},
                                                       {"after the step range", "forward"}};
  EXPECT_EQ(scopes_by_record(*reader), expected);
}

// Megatron pushes in its own domain while the job's code pushes in the core one: a pop closes
// its own domain's innermost range, whatever was pushed above it since.
TEST_F(RuntimeTest, APopClosesTheInnermostRangeOfItsOwnDomain) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(kMergeBase, 1 << 20);
    inject_nvtx();
    auto* megatron = reinterpret_cast<nvtxDomainHandle_t>(0x1);
    domain_push(megatron, "layer 3");
    nvtx_push("user code");
    record("both");
    domain_pop(megatron);  // closes "layer 3", below "user code"
    record("only the core range");
    nvtx_pop();
    record("none");
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const std::map<std::string, std::string> expected = {
      {"both", "layer 3 / user code"}, {"only the core range", "user code"}, {"none", ""}};
  EXPECT_EQ(scopes_by_record(*reader), expected);
}

}  // namespace
}  // namespace lockstep::collectors
