#include "tools/term.h"

#include <cstdlib>
#include <mutex>

#include <unistd.h>

namespace lockstep::tools {

bool is_tty(FILE* file) { return isatty(fileno(file)) == 1; }

Style::Style(FILE* file) {
  const char* no_colour = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  colour_ =
      is_tty(file) && !(no_colour && *no_colour) && !(term && std::string_view(term) == "dumb");
}

std::string Style::wrap(const char* code, std::string_view s) const {
  if (!colour_) return std::string(s);
  return std::string("\033[") + code + "m" + std::string(s) + "\033[0m";
}

namespace {
std::mutex progress_mutex;
}

Progress::Progress(std::string label) : label_(std::move(label)), enabled_(is_tty(stderr)) {}

void Progress::update(long done, long total) {
  if (!enabled_) return;
  std::lock_guard lock(progress_mutex);
  std::fprintf(stderr, "\r\033[K[%s %ld/%ld]", label_.c_str(), done, total);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  std::lock_guard lock(progress_mutex);
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace lockstep::tools
