// Reads one loaded object's dynamic symbol table without calling dlsym. Used only to find the
// real dlsym / dlvsym, since every dlsym call from inside the process reaches our hook.
#pragma once

#include <link.h>

namespace lockstep::interpose {

// Address of the default-version (non-hidden) definition of a function named `name` in the
// object with this load bias and dynamic section, or null. IFUNCs are not resolved (not needed
// for dlsym / dlvsym or the CUDA APIs).
void* find_defined_function(ElfW(Addr) load_bias, const ElfW(Dyn) * dynamic, const char* name);

// Same search for any function or data object, without allocating (safe inside a malloc
// interposer's dlsym(RTLD_NEXT)). IFUNC and TLS definitions are found but not resolved:
// needs_dlsym tells the caller to ask the real dlsym for that object instead.
struct ElfSymbol {
  void* address = nullptr;
  bool needs_dlsym = false;
  bool found() const { return address != nullptr || needs_dlsym; }
};
ElfSymbol find_defined_symbol(ElfW(Addr) load_bias, const ElfW(Dyn) * dynamic, const char* name);

}  // namespace lockstep::interpose
