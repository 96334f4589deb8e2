// dlsym / dlvsym / dlmopen. cuBLAS, cuBLASLt and Triton take libcuda's launch functions with
// dlsym on a handle, which symbol interposition alone never sees: for a name we wrap whose
// lookup found the real function, hand out our wrapper instead (GOTCHA's rule: a same-named
// symbol of another library is returned untouched).
#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include "debug_log.h"
#include "elf_symbol.h"
#include "interception.h"
#include "loaded_objects.h"

namespace lockstep::interpose {
namespace {

const char* object_name(const void* addr) {
  Dl_info info;
  if (addr == nullptr || dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

void* substitute_wrapper(const char* name, void* found) {
  if (found == nullptr || inside_own_object(found)) return found;  // already ours (RTLD_DEFAULT)
  HookId id;
  if (!find_hook(name, &id)) return found;
  void* real = real_address(id);
  if (real != found) {
    LOCKSTEP_DEBUG_LOG("dlsym(%s) = %p (%s) is not the %p we forward to: not wrapped", name, found,
                       object_name(found), real);
    return found;
  }
  return wrapper_address(id);
}

// (caller object, name, version, handle) of every lookup, for coverage checks on the GPU.
void log_lookup(const void* caller, void* handle, const char* name, const char* version,
                void* result) {
  if (!debug_enabled()) return;
  debug_log("dlsym from %s: %s%s%s handle=%p -> %p%s", object_name(caller),
            name != nullptr ? name : "(null)", version != nullptr ? "@" : "",
            version != nullptr ? version : "", handle, result,
            result != nullptr && inside_own_object(result) ? " (shim)" : "");
}

// The caller asked for RTLD_NEXT. Forwarding that to the real dlsym would search after *our*
// object; search after the caller's instead, in load order (as GOTCHA does). Objects loaded
// RTLD_LOCAL are included, which glibc would skip for a caller in the global scope.
// Unversioned lookups read symbol tables directly and allocate nothing: a malloc interposer
// (jemalloc's lazy pthread_create lookup) may ask from inside malloc.
struct NextSearch {
  const link_map* caller;
  const char* name;
  bool seen_caller = false;
  void* found = nullptr;
  const char* fallback_object = nullptr;  // IFUNC / TLS definition: ask the real dlsym there
};

void* next_after_caller(const void* caller, const char* name, const char* version) {
  if (inside_own_object(caller)) {
    return version != nullptr ? real_dlvsym()(RTLD_NEXT, name, version)
                              : real_dlsym()(RTLD_NEXT, name);
  }
  Dl_info info;
  link_map* caller_map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&caller_map), RTLD_DL_LINKMAP) == 0 ||
      caller_map == nullptr) {
    LOCKSTEP_DEBUG_LOG("RTLD_NEXT lookup of %s from unknown caller %p", name, caller);
    return nullptr;
  }
  if (version == nullptr) {
    NextSearch search{caller_map, name};
    dl_iterate_phdr(
        [](dl_phdr_info* object, size_t, void* data) {
          auto* s = static_cast<NextSearch*>(data);
          const char* path = object->dlpi_name != nullptr ? object->dlpi_name : "";
          if (!s->seen_caller) {
            const char* caller_path = s->caller->l_name != nullptr ? s->caller->l_name : "";
            s->seen_caller =
                object->dlpi_addr == s->caller->l_addr && std::strcmp(path, caller_path) == 0;
            return 0;
          }
          const ElfW(Dyn)* dynamic = nullptr;
          bool own = false;
          for (int i = 0; i < object->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = object->dlpi_phdr[i];
            const auto start = reinterpret_cast<const void*>(object->dlpi_addr + ph.p_vaddr);
            if (ph.p_type == PT_DYNAMIC) dynamic = static_cast<const ElfW(Dyn)*>(start);
            if (ph.p_type == PT_LOAD && inside_own_object(start)) own = true;
          }
          if (own || dynamic == nullptr) return 0;
          const ElfSymbol symbol = find_defined_symbol(object->dlpi_addr, dynamic, s->name);
          if (!symbol.found()) return 0;
          s->found = symbol.address;
          if (symbol.needs_dlsym) s->fallback_object = path;
          return 1;
        },
        &search);
    if (search.fallback_object != nullptr && search.fallback_object[0] != '\0') {
      if (void* handle = dlopen(search.fallback_object, RTLD_NOLOAD | RTLD_LAZY)) {
        search.found = real_dlsym()(handle, name);
        dlclose(handle);
      }
    }
    if (search.found != nullptr) return search.found;
  } else {
    const std::vector<LoadedObject> objects = loaded_objects();
    const int caller_index = object_index_of(objects, caller);
    for (size_t i = caller_index + 1; caller_index >= 0 && i < objects.size(); ++i) {
      if (objects[i].is_own) continue;
      if (void* p = symbol_in_object(objects[i], name, version)) return p;
    }
  }
  // Not found: leave a dlerror() message naming the symbol, as the real lookup would.
  if (DlvsymFn f = real_dlvsym()) (void)f(RTLD_NEXT, name, "LOCKSTEP_NOT_FOUND");
  return nullptr;
}

// RTLD_DEFAULT searches the caller's scope: the global scope, then (for a library opened
// RTLD_LOCAL, such as a Python extension) its own dependencies. Asked from the shim, the real
// dlsym sees only the global scope, so a miss is retried in the caller's local scope.
void* default_scope_miss(const void* caller, const char* name, const char* version) {
  if (inside_own_object(caller)) return nullptr;
  Dl_info info;
  link_map* map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || map->l_name == nullptr || map->l_name[0] == '\0') {
    return nullptr;  // the main program's scope is the global scope
  }
  void* handle = dlopen(map->l_name, RTLD_NOLOAD | RTLD_LAZY);
  if (handle == nullptr) return nullptr;
  void* found =
      version != nullptr ? real_dlvsym()(handle, name, version) : real_dlsym()(handle, name);
  dlclose(handle);
  return found;
}

}  // namespace
}  // namespace lockstep::interpose

using namespace lockstep::interpose;

LOCKSTEP_INTERCEPTOR void* dlsym(void* handle, const char* name) {
  const void* caller = __builtin_return_address(0);
  DlsymFn real = real_dlsym();
  if (real == nullptr) return nullptr;
  void* found = handle == RTLD_NEXT ? next_after_caller(caller, name, nullptr) : real(handle, name);
  if (found == nullptr && handle == RTLD_DEFAULT) found = default_scope_miss(caller, name, nullptr);
  void* result = substitute_wrapper(name, found);
  log_lookup(caller, handle, name, nullptr, result);
  return result;
}

LOCKSTEP_INTERCEPTOR void* dlvsym(void* handle, const char* name, const char* version) {
  const void* caller = __builtin_return_address(0);
  DlvsymFn real = real_dlvsym();
  if (real == nullptr) return nullptr;
  void* found =
      handle == RTLD_NEXT ? next_after_caller(caller, name, version) : real(handle, name, version);
  if (found == nullptr && handle == RTLD_DEFAULT) found = default_scope_miss(caller, name, version);
  void* result = substitute_wrapper(name, found);
  log_lookup(caller, handle, name, version, result);
  return result;
}

// dlmopen resolves relative names against the caller's RUNPATH, so it must reach the C library
// with the caller's return address: the x86-64 entry below logs, then tail-jumps.
extern "C" __attribute__((visibility("hidden"))) void* lockstep_dlmopen_target(Lmid_t namespace_id,
                                                                               const char* file,
                                                                               int mode) {
  LOCKSTEP_DEBUG_LOG("dlmopen(%ld, %s, 0x%x)", static_cast<long>(namespace_id),
                     file != nullptr ? file : "(null)", mode);
  static void* const real = real_dlsym() != nullptr ? real_dlsym()(RTLD_NEXT, "dlmopen") : nullptr;
  return real;
}

extern "C" __attribute__((visibility("hidden"))) void* lockstep_dlmopen_missing(Lmid_t, const char*,
                                                                                int) {
  return nullptr;
}

#if defined(__x86_64__)
asm(R"(
  .text
  .globl dlmopen
  .type dlmopen, @function
dlmopen:
  .cfi_startproc
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  push %rdx
  .cfi_adjust_cfa_offset 8
  call lockstep_dlmopen_target
  pop %rdx
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  test %rax, %rax
  jz 1f
  jmp *%rax
1:
  jmp lockstep_dlmopen_missing
  .cfi_endproc
  .size dlmopen, .-dlmopen
)");
#else
// Elsewhere a plain forward: relative names then resolve against the shim's RUNPATH (it has none).
LOCKSTEP_INTERCEPTOR void* dlmopen(Lmid_t namespace_id, const char* file, int mode) {
  using DlmopenFn = void* (*)(Lmid_t, const char*, int);
  void* real = lockstep_dlmopen_target(namespace_id, file, mode);
  return real != nullptr ? reinterpret_cast<DlmopenFn>(real)(namespace_id, file, mode) : nullptr;
}
#endif
