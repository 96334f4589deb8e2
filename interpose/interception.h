// Interception machinery, after LLVM compiler-rt's interception.h: one typed REAL(fn) pointer per
// hooked symbol, filled lazily from the library that really defines fn.
//
// How to add an interceptor
//   1. Add a row LOCKSTEP_HOOK(library, name, signature) to hooked_symbols.def, where signature
//      names a function type in cuda_api.h (spell it out; do not take decltype of a CUDA name,
//      C++ overloads in the headers make that ambiguous).
//   2. If the driver hands the function out through cuGetProcAddress, add its base name to
//      driver_entry_points.def, once per ABI version and per-thread variant.
//   3. Define the wrapper in one of the *_hooks.cpp files:
//        LOCKSTEP_INTERCEPTOR cudaError_t cudaFoo(int x) {
//          ...; return LOCKSTEP_FORWARD(cudaFoo, x);
//        }
//      Its parameters must match the real header's declaration (the compiler checks it).
//      LOCKSTEP_FORWARD calls REAL(cudaFoo), or returns missing_result<R>() when REAL() is null
//      (no loaded object defines the symbol).
//   4. Report to collectors only through collectors/events.h, inside a Nesting scope (scope.h)
//      so that a call seen at two layers produces one event (hook_support.h: traced_call for
//      operations, report_state for allocation / handle / communicator bookkeeping).
//   5. The export test (tests/cpu/interpose/exports_test.cpp) checks the new name is exported;
//      names outside exports.map's patterns are not.
//
// How the real symbol is found on Linux (real_symbols.cpp)
//   - Lazily on first use, thread-safe (one atomic slot per hook), cached once found. A miss is
//     retried only after a new object was loaded (dl_iterate_phdr's dlpi_adds counter), because
//     the job dlopens libcudart / libnccl / libcublas after we start.
//   - First dlsym(RTLD_NEXT, name): the next definition after the shim in the global scope. This
//     also chains correctly to another interposer loaded after us.
//   - Else walk every loaded object (dl_iterate_phdr), objects whose file name matches the
//     library first, skipping the shim's own object: dlopen(path, RTLD_NOLOAD | RTLD_LAZY) and the
//     real dlsym on that handle, accepting the result only if dladdr says that object defines it.
//     This finds symbols of libraries loaded RTLD_LOCAL (Python extension dependencies), where
//     RTLD_NEXT returns null. dlsym picks the default version, so versioned symbols
//     (cudaLaunchKernel@@libcudart.so.13) are found like plain ones.
//   - A result inside the shim's own object is never accepted, so REAL() can never be a wrapper.
//   - The real dlsym / dlvsym are found without calling dlsym (which is ours): by reading the
//     dynamic symbol table of the object that defines dlerror (libc, or libdl before glibc 2.34),
//     taking the default (non-hidden) version; then dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34" or
//     "GLIBC_2.2.5") chains to a dlsym interposed after us, if any.
//   - The shim's unversioned definitions satisfy the job's versioned references; that is why
//     exports.map is an anonymous version node (it only limits what is exported).
//   - dlsym / dlvsym on a handle: for a hooked name whose result is the function REAL() forwards
//     to, the caller gets our wrapper (dl_hooks.cpp). RTLD_NEXT is resolved after the *caller's*
//     object, RTLD_DEFAULT misses are retried in the caller's local scope.
//   - cuGetProcAddress / cudaGetDriverEntryPoint*: the driver's answer for (base name, version,
//     per-thread flag) is swapped for the wrapper of that exact variant
//     (driver_entry_points.def); the wrapper forwards to the pointer the driver gave.
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda_api.h"
#include "common/hot.h"

#define LOCKSTEP_INTERCEPTOR extern "C" __attribute__((visibility("default")))
// An interceptor on the path of a training step's every few microseconds (launches, GEMMs, async
// copies): laid out with the collectors' hot path (common/hot.h).
#define LOCKSTEP_HOT_INTERCEPTOR LOCKSTEP_INTERCEPTOR LOCKSTEP_HOT
// A kernel launch's interceptor: with the rest of the launch's own path (common/hot.h); its
// _ptsz twin right after them.
#define LOCKSTEP_LAUNCH_INTERCEPTOR LOCKSTEP_INTERCEPTOR LOCKSTEP_LAUNCH_ENTRY
#define LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR LOCKSTEP_INTERCEPTOR LOCKSTEP_LAUNCH_TWIN

namespace lockstep::interpose {

enum class Library : uint8_t { cudart, cuda, cublas, cublasLt, nccl };

enum class HookId : uint16_t {
#define LOCKSTEP_HOOK(library, name, signature) name,
#include "hooked_symbols.def"
#undef LOCKSTEP_HOOK
  kCount
};
inline constexpr int kHookCount = static_cast<int>(HookId::kCount);

// Typed pointers to the real functions: fn::cudaMalloc is sig::cudaMallocFn*.
namespace fn {
#define LOCKSTEP_HOOK(library, name, signature) using name = ::lockstep::interpose::sig::signature*;
#include "hooked_symbols.def"
#undef LOCKSTEP_HOOK
}  // namespace fn

struct HookInfo {
  const char* name;
  Library library;
};
const HookInfo& hook_info(HookId id);

// The real function for a hook, or null when no loaded object defines it (yet). The fast path
// (already found) is one acquire load.
extern std::atomic<void*> g_real_slots[kHookCount];
void* resolve_real_address(HookId id);
inline void* real_address(HookId id) {
  void* p = g_real_slots[static_cast<int>(id)].load(std::memory_order_acquire);
  return p != nullptr ? p : resolve_real_address(id);
}
// Record a real pointer handed out by the driver (cuGetProcAddress) for a hook whose slot is
// still empty. Returns the pointer the wrapper will forward to.
void* adopt_real_address(HookId id, void* real);
// Our own wrapper for a hook (never null once the shim is loaded).
void* wrapper_address(HookId id);
// The hook with this exported name, if any.
bool find_hook(const char* name, HookId* id);

// Real-symbol lookup for names that are not hooked (or are: the real one then). Cached.
void* resolve_symbol(const char* name);
// Lookup in loaded objects, skipping the shim (see above); library = null: any object.
void* lookup_real(const char* name, const char* library_prefix);

// The real dlsym / dlvsym of the C library (never our hooks).
using DlsymFn = void* (*)(void*, const char*);
using DlvsymFn = void* (*)(void*, const char*, const char*);
DlsymFn real_dlsym();
DlvsymFn real_dlvsym();

// The shim's own object: true when addr lies in one of its loaded segments.
bool inside_own_object(const void* addr);

}  // namespace lockstep::interpose

#define REAL(name)                                    \
  (reinterpret_cast<::lockstep::interpose::fn::name>( \
      ::lockstep::interpose::real_address(::lockstep::interpose::HookId::name)))
