// probe_value() is defined by two libraries (PROBE_VALUE 1 and 2); caller_next() asks
// dlsym(RTLD_NEXT) from a library loaded between them (built without sibling calls: the
// anchor is dlsym's return address). Built three times, see CMakeLists.txt.
#include <dlfcn.h>

#if defined(PROBE_VALUE)
extern "C" __attribute__((visibility("default"))) int probe_value() { return PROBE_VALUE; }
extern "C" {
__attribute__((visibility("default"))) int probe_data = 10 * PROBE_VALUE;
}
// An IFUNC: a lookup must return what the resolver picks, never the resolver itself.
extern "C" int probe_ifunc_impl() { return 100 * PROBE_VALUE; }
extern "C" void* probe_ifunc_resolver() { return reinterpret_cast<void*>(&probe_ifunc_impl); }
extern "C" __attribute__((visibility("default"), ifunc("probe_ifunc_resolver"))) int probe_ifunc();
#else
extern "C" __attribute__((visibility("default"))) void* caller_next(const char* name) {
  return dlsym(RTLD_NEXT, name);
}
extern "C" __attribute__((visibility("default"))) void* caller_next_versioned(const char* name,
                                                                              const char* version) {
  return dlvsym(RTLD_NEXT, name, version);
}
#endif
