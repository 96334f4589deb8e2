// Terminal niceties, only on a terminal: colour (unless NO_COLOR) and a one-line progress.
// Anything else gets plain, stable text.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace lockstep::tools {

bool is_tty(FILE* file);

class Style {
 public:
  explicit Style(FILE* file);
  std::string red(std::string_view s) const { return wrap("31", s); }
  std::string green(std::string_view s) const { return wrap("32", s); }
  std::string yellow(std::string_view s) const { return wrap("33", s); }
  std::string bold(std::string_view s) const { return wrap("1", s); }
  std::string dim(std::string_view s) const { return wrap("2", s); }

 private:
  std::string wrap(const char* code, std::string_view s) const;
  bool colour_ = false;
};

// "\r[label 3/8]" on stderr when it is a terminal; clear() erases it.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress() { clear(); }
  void update(long done, long total);
  void clear();

 private:
  std::string label_;
  bool enabled_ = false, shown_ = false;
};

}  // namespace lockstep::tools
