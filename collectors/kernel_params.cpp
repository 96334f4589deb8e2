#include "collectors/kernel_params.h"

#include <cstring>

#include <cuda.h>
#include <xxhash.h>

namespace lockstep::collectors {

bool gather_param_bytes(const std::vector<ParamInfo>& layout, void** kernel_params, void** extra,
                        std::vector<uint8_t>* out) {
  out->clear();
  if (kernel_params != nullptr) {
    size_t total = 0;
    for (const ParamInfo& p : layout) total = std::max<size_t>(total, p.offset + p.size);
    out->assign(total, 0);
    for (size_t i = 0; i < layout.size(); ++i) {
      if (kernel_params[i] == nullptr) return false;
      std::memcpy(out->data() + layout[i].offset, kernel_params[i], layout[i].size);
    }
    return true;
  }
  if (extra == nullptr) return layout.empty();
  const void* buffer = nullptr;
  size_t size = 0;
  bool have_size = false;
  for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; ++i) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = extra[++i];
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      const auto* size_ptr = static_cast<const size_t*>(extra[++i]);
      if (size_ptr != nullptr) size = *size_ptr, have_size = true;
    } else {
      ++i;  // an option we do not know: skip its value
    }
  }
  if (buffer == nullptr || !have_size) return false;
  out->assign(static_cast<const uint8_t*>(buffer), static_cast<const uint8_t*>(buffer) + size);
  return true;
}

DecodedArgs decode_args(const std::vector<ParamInfo>& layout, const std::vector<uint8_t>& bytes,
                        const PointerLookup& lookup) {
  DecodedArgs decoded;
  decode_args(layout, bytes, lookup, &decoded);
  return decoded;
}

void decode_args(const std::vector<ParamInfo>& layout, const std::vector<uint8_t>& bytes,
                 const PointerLookup& lookup, DecodedArgs* out, AddressRange candidates) {
  DecodedArgs& decoded = *out;
  decoded.pointers.clear();
  // Only the parameters' own bytes are digested: padding between parameters is whatever the
  // caller's stack held, and a 1-byte parameter is most often an empty functor (every
  // PyTorch `[]` lambda) whose byte is indeterminate. Both differ between identical runs.
  // The cost: a change of a lone bool/char argument is not seen in args_digest (the kernel's
  // output fingerprints at level full still see its effect).
  thread_local auto* scalars_buffer = new std::vector<uint8_t>;  // never freed (exit)
  std::vector<uint8_t>& scalars = *scalars_buffer;
  scalars.assign(bytes.size(), 0);
  for (const ParamInfo& p : layout) {
    if (p.size <= 1 || p.offset >= bytes.size()) continue;
    const uint64_t end = std::min<uint64_t>(uint64_t{p.offset} + p.size, bytes.size());
    std::memcpy(scalars.data() + p.offset, bytes.data() + p.offset, end - p.offset);
  }
  for (uint32_t param = 0; param < layout.size(); ++param) {
    const ParamInfo& p = layout[param];
    const uint64_t end = std::min<uint64_t>(uint64_t{p.offset} + p.size, bytes.size());
    for (uint64_t at = (uint64_t{p.offset} + 7) & ~7ull; at + 8 <= end; at += 8) {
      uintptr_t word = 0;
      std::memcpy(&word, bytes.data() + at, 8);
      if (word == 0 || !candidates.holds(word)) continue;
      if (auto hit = lookup(word)) {
        decoded.pointers.push_back({param, static_cast<uint32_t>(at), word, *hit});
        std::memset(scalars.data() + at, 0, 8);
      }
    }
  }
  decoded.scalar_digest = XXH3_64bits(scalars.data(), scalars.size());
}

}  // namespace lockstep::collectors
