#include "loaded_objects.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>

#include "elf_symbol.h"
#include "interception.h"

namespace lockstep::interpose {
namespace {

const ElfW(Dyn) * dynamic_section(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      return reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  return nullptr;
}

bool same_object(const link_map* map, const LoadedObject& object) {
  if (map->l_addr != object.load_bias) return false;
  const char* name = map->l_name != nullptr ? map->l_name : "";
  return object.path == name;
}

}  // namespace

std::vector<LoadedObject> loaded_objects() {
  (void)inside_own_object(nullptr);  // learn our own segments outside the iteration below
  std::vector<LoadedObject> objects;
  objects.reserve(64);
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<std::vector<LoadedObject>*>(data);
        LoadedObject object;
        object.path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        object.load_bias = info->dlpi_addr;
        object.dynamic = dynamic_section(info);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD &&
              inside_own_object(reinterpret_cast<const void*>(info->dlpi_addr + ph.p_vaddr))) {
            object.is_own = true;
          }
        }
        out->push_back(std::move(object));
        return 0;
      },
      &objects);
  return objects;
}

unsigned long long load_generation() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) {
        if (size >= offsetof(dl_phdr_info, dlpi_subs)) {
          *static_cast<unsigned long long*>(data) = info->dlpi_adds;
        }
        return 1;  // the counter is the same in every entry: stop at the first
      },
      &adds);
  return adds;
}

bool defined_in(const void* addr, const LoadedObject& object) {
  Dl_info info;
  link_map* map = nullptr;
  if (dladdr1(addr, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return false;
  }
  return same_object(map, object);
}

int object_index_of(const std::vector<LoadedObject>& objects, const void* addr) {
  Dl_info info;
  link_map* map = nullptr;
  if (dladdr1(addr, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return -1;
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    if (same_object(map, objects[i])) return static_cast<int>(i);
  }
  return -1;
}

void* symbol_in_object(const LoadedObject& object, const char* name, const char* version) {
  if (object.is_own || object.path.empty()) return nullptr;
  void* result = nullptr;
  // dlopen of an object that is already loaded only takes a reference; RTLD_LAZY because
  // RTLD_NOLOAD must come with a binding mode.
  if (void* handle = dlopen(object.path.c_str(), RTLD_NOLOAD | RTLD_LAZY)) {
    if (version != nullptr) {
      if (DlvsymFn f = real_dlvsym()) result = f(handle, name, version);
    } else if (DlsymFn f = real_dlsym()) {
      result = f(handle, name);
    }
    dlclose(handle);
    // The handle's scope includes its dependencies: keep only this object's own definition.
    if (result != nullptr && !defined_in(result, object)) result = nullptr;
  } else if (version == nullptr) {
    // Not openable by its recorded name (renamed or deleted file): read its symbol table.
    result = find_defined_function(object.load_bias, object.dynamic, name);
  }
  if (result != nullptr && inside_own_object(result)) result = nullptr;
  return result;
}

}  // namespace lockstep::interpose
