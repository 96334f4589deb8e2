#include "elf_symbol.h"

#include <cstdint>
#include <cstring>

namespace lockstep::interpose {
namespace {

struct DynamicTables {
  const ElfW(Sym) * symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu_hash = nullptr;
  const ElfW(Word) * sysv_hash = nullptr;
  const ElfW(Half) * versym = nullptr;
};

// ld.so rewrites most d_ptr entries to run-time addresses; some architectures keep them
// relative. A value below the load bias cannot be an absolute address in this object.
template <typename T>
const T* at(ElfW(Addr) bias, ElfW(Addr) value) {
  if (value < bias) value += bias;
  return reinterpret_cast<const T*>(value);
}

DynamicTables read_tables(ElfW(Addr) bias, const ElfW(Dyn) * dynamic) {
  DynamicTables t;
  for (const ElfW(Dyn)* d = dynamic; d != nullptr && d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        t.symtab = at<ElfW(Sym)>(bias, d->d_un.d_ptr);
        break;
      case DT_STRTAB:
        t.strtab = at<char>(bias, d->d_un.d_ptr);
        break;
      case DT_GNU_HASH:
        t.gnu_hash = at<uint32_t>(bias, d->d_un.d_ptr);
        break;
      case DT_HASH:
        t.sysv_hash = at<ElfW(Word)>(bias, d->d_un.d_ptr);
        break;
      case DT_VERSYM:
        t.versym = at<ElfW(Half)>(bias, d->d_un.d_ptr);
        break;
      default:
        break;
    }
  }
  return t;
}

uint32_t gnu_hash(const char* name) {
  uint32_t h = 5381;
  for (auto c = reinterpret_cast<const unsigned char*>(name); *c != 0; ++c) h = h * 33 + *c;
  return h;
}

unsigned long sysv_hash(const char* name) {
  unsigned long h = 0;
  for (auto c = reinterpret_cast<const unsigned char*>(name); *c != 0; ++c) {
    h = (h << 4) + *c;
    unsigned long g = h & 0xf0000000UL;
    if (g != 0) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// A global definition of that name whose version is the default one (hidden bit clear).
ElfSymbol match(ElfW(Addr) bias, const DynamicTables& t, uint32_t index, const char* name,
                bool functions_only) {
  const ElfW(Sym)& sym = t.symtab[index];
  if (sym.st_shndx == SHN_UNDEF) return {};
  const unsigned type = sym.st_info & 0xf, binding = sym.st_info >> 4;  // same in ELF32/ELF64
  if (binding != STB_GLOBAL && binding != STB_WEAK && binding != STB_GNU_UNIQUE) return {};
  if (t.versym != nullptr && (t.versym[index] & 0x8000) != 0) return {};
  if (std::strcmp(t.strtab + sym.st_name, name) != 0) return {};
  ElfSymbol result;
  if (type == STT_FUNC || (!functions_only && type == STT_OBJECT)) {
    result.address = reinterpret_cast<void*>(bias + sym.st_value);
  } else if (!functions_only && (type == STT_GNU_IFUNC || type == STT_TLS)) {
    result.needs_dlsym = true;
  }
  return result;
}

ElfSymbol find(ElfW(Addr) bias, const ElfW(Dyn) * dynamic, const char* name, bool functions_only) {
  if (dynamic == nullptr || name == nullptr) return {};
  const DynamicTables t = read_tables(bias, dynamic);
  if (t.symtab == nullptr || t.strtab == nullptr) return {};
  if (t.gnu_hash != nullptr) {
    const uint32_t nbuckets = t.gnu_hash[0], symoffset = t.gnu_hash[1], bloom_size = t.gnu_hash[2];
    if (nbuckets == 0) return {};
    const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(t.gnu_hash + 4);
    const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    const uint32_t h = gnu_hash(name);
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return {};
    for (;; ++i) {
      const uint32_t ch = chain[i - symoffset];
      if ((ch | 1) == (h | 1)) {
        if (ElfSymbol s = match(bias, t, i, name, functions_only); s.found()) return s;
      }
      if ((ch & 1) != 0) break;
    }
    return {};
  }
  if (t.sysv_hash != nullptr) {
    const ElfW(Word) nbucket = t.sysv_hash[0];
    const ElfW(Word)* bucket = t.sysv_hash + 2;
    const ElfW(Word)* chain = bucket + nbucket;
    for (ElfW(Word) i = bucket[sysv_hash(name) % nbucket]; i != STN_UNDEF; i = chain[i]) {
      if (ElfSymbol s = match(bias, t, i, name, functions_only); s.found()) return s;
    }
  }
  return {};
}

}  // namespace

void* find_defined_function(ElfW(Addr) bias, const ElfW(Dyn) * dynamic, const char* name) {
  return find(bias, dynamic, name, true).address;
}

ElfSymbol find_defined_symbol(ElfW(Addr) bias, const ElfW(Dyn) * dynamic, const char* name) {
  return find(bias, dynamic, name, false);
}

}  // namespace lockstep::interpose
