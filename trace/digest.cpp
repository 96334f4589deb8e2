#include "trace/digest.h"

#include "trace/writer.h"

namespace lockstep::trace {

uint64_t record_content_hash(const Record& record, std::string_view name,
                             const std::vector<std::string_view>& buffer_labels) {
  // buffer_labels[i] is the text of record.buffers[i].label.
  size_t index = 0;
  return content_hash(record, text_hash(name), [&](StringId) {
    std::string_view label =
        index < buffer_labels.size() ? buffer_labels[index] : std::string_view();
    ++index;
    return text_hash(label);
  });
}

}  // namespace lockstep::trace
