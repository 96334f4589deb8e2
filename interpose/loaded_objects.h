// The loaded objects, in the dynamic linker's order, and the shim's own place among them.
#pragma once

#include <link.h>

#include <string>
#include <vector>

namespace lockstep::interpose {

struct LoadedObject {
  std::string path;          // dlpi_name; empty for the main program
  ElfW(Addr) load_bias = 0;  // dlpi_addr (link_map l_addr)
  const ElfW(Dyn) * dynamic = nullptr;
  bool is_own = false;  // the shim itself
};

std::vector<LoadedObject> loaded_objects();
// Changes whenever an object is loaded (dlpi_adds).
unsigned long long load_generation();

// The defining object of `addr` is `object` (dladdr agrees on load bias and path).
bool defined_in(const void* addr, const LoadedObject& object);
// Index in `objects` of the object containing `addr`, or -1.
int object_index_of(const std::vector<LoadedObject>& objects, const void* addr);

// Symbol `name` (with `version`, or the default one) defined by `object` itself, never the shim.
void* symbol_in_object(const LoadedObject& object, const char* name, const char* version);

}  // namespace lockstep::interpose
