#include "data/progress_meter.h"

#include <unistd.h>

#include <cstdio>

namespace linea::data {

namespace {

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

ProgressMeter::ProgressMeter(std::string label, bool enabled)
    : label_(std::move(label)),
      enabled_(enabled),
      terminal_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

double ProgressMeter::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressMeter::update(int64_t docs, int64_t tokens, int64_t text_bytes) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < (terminal_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10000))) return;
  last_print_ = now;
  print(docs, tokens, text_bytes, false);
}

double ProgressMeter::finish(int64_t docs, int64_t tokens, int64_t text_bytes) {
  if (enabled_) print(docs, tokens, text_bytes, true);
  return elapsed_seconds();
}

void ProgressMeter::print(int64_t docs, int64_t tokens, int64_t text_bytes, bool final) {
  const double seconds = elapsed_seconds();
  const double mb = static_cast<double>(text_bytes) / 1e6;
  std::fprintf(stderr, "%s%s: %s docs  %.2fM tokens  %.1f MB text  %.1f MB/s  %.1f s%s", terminal_ ? "\r\033[K" : "",
               label_.c_str(), with_commas(docs).c_str(), static_cast<double>(tokens) / 1e6, mb,
               seconds > 0 ? mb / seconds : 0.0, seconds, terminal_ && !final ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace linea::data
