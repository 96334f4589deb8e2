// lockstep as an NVTX injection library: `lockstep run` sets NVTX_INJECTION64_PATH to the shim,
// and NVTX (header-only, inside the job) calls InitializeInjectionNvtx2 on its first use. We
// register callbacks for the ASCII and Ex range/mark calls of the core and domain modules; a
// range or mark whose message matches LOCKSTEP_STEP_ON advances the step, and a pushed range
// (push/pop, not start/end, which need not nest on a thread) opens a scope on the calling thread
// (scopes.h) until its pop.
#include <nvtx3/nvToolsExt.h>

#include "collectors/events.h"
#include "collectors/scopes.h"

namespace {

using lockstep::collectors::marker_range_push;
using lockstep::collectors::scope_pop;
using lockstep::collectors::scope_push;

// A range's name when its message is not ASCII (Unicode, a registered string): its scope is
// still pushed, so that its pop closes it.
constexpr const char* kUnnamedRange = "(unnamed range)";

thread_local int g_range_depth = 0;

const char* ascii_message(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr || attributes->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return attributes->message.ascii;
}

void mark_ex(const nvtxEventAttributes_t* attributes) {
  if (const char* text = ascii_message(attributes)) marker_range_push(text);
}
void mark_a(const char* message) { marker_range_push(message); }
nvtxRangeId_t range_start_ex(const nvtxEventAttributes_t* attributes) {
  mark_ex(attributes);
  return 0;
}
nvtxRangeId_t range_start_a(const char* message) {
  marker_range_push(message);
  return 0;
}
void range_end(nvtxRangeId_t) {}
int push(const void* domain, const char* message) {
  const bool step = message != nullptr && marker_range_push(message);
  scope_push(message != nullptr ? message : kUnnamedRange, domain, step);
  return g_range_depth++;
}
int pop(const void* domain) {
  scope_pop(domain);
  return g_range_depth > 0 ? --g_range_depth : -1;
}
int range_push_ex(const nvtxEventAttributes_t* attributes) {
  return push(nullptr, ascii_message(attributes));
}
int range_push_a(const char* message) { return push(nullptr, message); }
int range_pop() { return pop(nullptr); }
// Domain (core2) variants.
void domain_mark_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  mark_ex(attributes);
}
nvtxRangeId_t domain_range_start_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  return range_start_ex(attributes);
}
void domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t) {}
int domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  return push(domain, ascii_message(attributes));
}
int domain_range_pop(nvtxDomainHandle_t domain) { return pop(domain); }

template <typename Fn>
void install(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (table != nullptr && id < size && table[id] != nullptr)
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr) return 0;
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) != 0) {
    install(table, size, NVTX_CBID_CORE_MarkEx, mark_ex);
    install(table, size, NVTX_CBID_CORE_MarkA, mark_a);
    install(table, size, NVTX_CBID_CORE_RangeStartEx, range_start_ex);
    install(table, size, NVTX_CBID_CORE_RangeStartA, range_start_a);
    install(table, size, NVTX_CBID_CORE_RangeEnd, range_end);
    install(table, size, NVTX_CBID_CORE_RangePushEx, range_push_ex);
    install(table, size, NVTX_CBID_CORE_RangePushA, range_push_a);
    install(table, size, NVTX_CBID_CORE_RangePop, range_pop);
  }
  table = nullptr;
  size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) != 0) {
    install(table, size, NVTX_CBID_CORE2_DomainMarkEx, domain_mark_ex);
    install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, domain_range_start_ex);
    install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, domain_range_end);
    install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, domain_range_push_ex);
    install(table, size, NVTX_CBID_CORE2_DomainRangePop, domain_range_pop);
  }
  return 1;  // success
}
