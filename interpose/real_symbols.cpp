// Finding the real functions behind our hooks (the rules are in interception.h).
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "collectors/events.h"
#include "debug_log.h"
#include "elf_symbol.h"
#include "interception.h"
#include "loaded_objects.h"

namespace lockstep::interpose {
namespace {

constexpr HookInfo kHooks[] = {
#define LOCKSTEP_HOOK(library, name, signature) {#name, Library::library},
#include "hooked_symbols.def"
#undef LOCKSTEP_HOOK
};
static_assert(sizeof kHooks / sizeof kHooks[0] == kHookCount);

// load_generation() + 1 at the last failed lookup; 0 = never tried.
std::atomic<unsigned long long> g_missed_at[kHookCount];

const char* library_prefix(Library library) {
  switch (library) {
    case Library::cudart:
      return "libcudart.so";
    case Library::cuda:
      return "libcuda.so";
    case Library::cublas:
      return "libcublas.so";
    case Library::cublasLt:
      return "libcublasLt.so";
    case Library::nccl:
      return "libnccl.so";
  }
  return nullptr;
}

bool basename_starts_with(const std::string& path, const char* prefix) {
  const size_t slash = path.rfind('/');
  const char* base = path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
  return std::strncmp(base, prefix, std::strlen(prefix)) == 0;
}

struct OwnSegments {
  std::array<uintptr_t, 16> begin{}, end{};
  int count = 0;
};

void own_anchor() {}

const OwnSegments& own_segments() {
  static const OwnSegments segments = [] {
    OwnSegments s;
    Dl_info info;
    link_map* map = nullptr;
    if (dladdr1(reinterpret_cast<void*>(&own_anchor), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) == 0 ||
        map == nullptr) {
      return s;
    }
    struct Search {
      const link_map* map;
      OwnSegments* out;
    } search{map, &s};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* search = static_cast<Search*>(data);
          const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
          const char* own = search->map->l_name != nullptr ? search->map->l_name : "";
          if (info->dlpi_addr != search->map->l_addr || std::strcmp(name, own) != 0) return 0;
          for (int i = 0; i < info->dlpi_phnum && search->out->count < 16; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            search->out->begin[search->out->count] = info->dlpi_addr + ph.p_vaddr;
            search->out->end[search->out->count] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
            ++search->out->count;
          }
          return 1;
        },
        &search);
    return s;
  }();
  return segments;
}

struct DlFunctions {
  DlsymFn dlsym = nullptr;
  DlvsymFn dlvsym = nullptr;
};

// dlsym and dlvsym are ours inside this process, so the C library's are read from the symbol
// table of the object that defines dlerror (which we do not hook).
const DlFunctions& dl_functions() {
  static const DlFunctions functions = [] {
    DlFunctions f;
    Dl_info info;
    link_map* map = nullptr;
    if (dladdr1(reinterpret_cast<void*>(&dlerror), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) != 0 &&
        map != nullptr) {
      f.dlsym = reinterpret_cast<DlsymFn>(find_defined_function(map->l_addr, map->l_ld, "dlsym"));
      f.dlvsym =
          reinterpret_cast<DlvsymFn>(find_defined_function(map->l_addr, map->l_ld, "dlvsym"));
    }
    // Chain to a dlsym interposed after us, as RTLD_NEXT would (the brief's recipe).
    if (f.dlvsym != nullptr) {
      for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
        void* next = f.dlvsym(RTLD_NEXT, "dlsym", version);
        if (next != nullptr && !inside_own_object(next)) {
          f.dlsym = reinterpret_cast<DlsymFn>(next);
          break;
        }
      }
    }
    if (f.dlsym == nullptr || f.dlvsym == nullptr) {
      LOCKSTEP_DEBUG_LOG("cannot find the C library's dlsym/dlvsym; lookups will fail");
    }
    return f;
  }();
  return functions;
}

struct NameIndex {
  std::array<HookId, kHookCount> sorted;
  NameIndex() {
    for (int i = 0; i < kHookCount; ++i) sorted[i] = static_cast<HookId>(i);
    std::sort(sorted.begin(), sorted.end(), [](HookId a, HookId b) {
      return std::strcmp(kHooks[int(a)].name, kHooks[int(b)].name) < 0;
    });
  }
};

const NameIndex& name_index() {
  static const NameIndex index;
  return index;
}

std::array<std::atomic<void*>, kHookCount>& wrappers() {
  static std::array<std::atomic<void*>, kHookCount> table{};
  return table;
}

}  // namespace

std::atomic<void*> g_real_slots[kHookCount];

const HookInfo& hook_info(HookId id) { return kHooks[static_cast<int>(id)]; }

DlsymFn real_dlsym() { return dl_functions().dlsym; }
DlvsymFn real_dlvsym() { return dl_functions().dlvsym; }

bool inside_own_object(const void* addr) {
  const auto p = reinterpret_cast<uintptr_t>(addr);
  const OwnSegments& s = own_segments();
  for (int i = 0; i < s.count; ++i) {
    if (p >= s.begin[i] && p < s.end[i]) return true;
  }
  return false;
}

bool find_hook(const char* name, HookId* id) {
  if (name == nullptr) return false;
  const auto& sorted = name_index().sorted;
  auto it = std::lower_bound(sorted.begin(), sorted.end(), name, [](HookId a, const char* n) {
    return std::strcmp(kHooks[int(a)].name, n) < 0;
  });
  if (it == sorted.end() || std::strcmp(kHooks[int(*it)].name, name) != 0) return false;
  *id = *it;
  return true;
}

void* lookup_real(const char* name, const char* library_prefix) {
  if (DlsymFn dlsym_fn = real_dlsym()) {
    void* next = dlsym_fn(RTLD_NEXT, name);
    if (next != nullptr && !inside_own_object(next)) return next;
  }
  // RTLD_LOCAL libraries are invisible to RTLD_NEXT: ask each loaded object, the library's own
  // file first.
  const std::vector<LoadedObject> objects = loaded_objects();
  for (int pass = library_prefix != nullptr ? 0 : 1; pass < 2; ++pass) {
    for (const LoadedObject& object : objects) {
      if (object.is_own || object.path.empty()) continue;
      const bool preferred =
          library_prefix != nullptr && basename_starts_with(object.path, library_prefix);
      if ((pass == 0) != preferred) continue;
      if (void* p = symbol_in_object(object, name, nullptr)) return p;
    }
  }
  return nullptr;
}

void* resolve_real_address(HookId id) {
  const int i = static_cast<int>(id);
  if (void* p = g_real_slots[i].load(std::memory_order_acquire)) return p;
  const unsigned long long generation = load_generation() + 1;
  if (g_missed_at[i].load(std::memory_order_relaxed) == generation) return nullptr;
  void* found = lookup_real(kHooks[i].name, library_prefix(kHooks[i].library));
  if (found == nullptr) {
    g_missed_at[i].store(generation, std::memory_order_relaxed);
    LOCKSTEP_DEBUG_LOG("no loaded object defines %s", kHooks[i].name);
    return nullptr;
  }
  void* expected = nullptr;
  if (!g_real_slots[i].compare_exchange_strong(expected, found, std::memory_order_acq_rel)) {
    return expected;  // another thread found it first (the same function)
  }
  LOCKSTEP_DEBUG_LOG("real %s at %p", kHooks[i].name, found);
  return found;
}

void* adopt_real_address(HookId id, void* real) {
  const int i = static_cast<int>(id);
  if (real == nullptr || inside_own_object(real)) return real_address(id);
  void* expected = nullptr;
  if (g_real_slots[i].compare_exchange_strong(expected, real, std::memory_order_acq_rel))
    return real;
  if (expected != real) {
    // Same ABI (driver_entry_points.def names the exported variant), another address: the
    // wrapper keeps forwarding to the first one.
    LOCKSTEP_DEBUG_LOG("%s: driver handed out %p, forwarding to %p", kHooks[i].name, real,
                       expected);
  }
  return expected;
}

void* wrapper_address(HookId id) {
  auto& table = wrappers();
  const int i = static_cast<int>(id);
  if (void* p = table[i].load(std::memory_order_acquire)) return p;
  // Our own definition, read from our symbol table: taking &name in C++ would go through the
  // GOT, which an earlier definition of the same name could take over.
  for (const LoadedObject& object : loaded_objects()) {
    if (!object.is_own) continue;
    void* p = find_defined_function(object.load_bias, object.dynamic, kHooks[i].name);
    if (p != nullptr) table[i].store(p, std::memory_order_release);
    return p;
  }
  return nullptr;
}

void* resolve_symbol(const char* name) {
  if (name == nullptr) return nullptr;
  HookId id;
  if (find_hook(name, &id)) return real_address(id);
  static std::mutex mutex;
  static std::unordered_map<std::string, void*>* cache = new std::unordered_map<std::string, void*>;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(name);
    if (it != cache->end()) return it->second;
  }
  void* p = lookup_real(name, nullptr);
  if (p != nullptr) {
    std::lock_guard<std::mutex> lock(mutex);
    cache->emplace(name, p);
  }
  return p;
}

namespace {
// Collectors call unhooked library functions through our lookup.
__attribute__((constructor)) void register_resolver() {
  collectors::set_symbol_resolver(&resolve_symbol);
}
}  // namespace

}  // namespace lockstep::interpose
