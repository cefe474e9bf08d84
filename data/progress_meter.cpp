#include "data/progress_meter.h"

#include <unistd.h>

#include <algorithm>
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

void ProgressMeter::update(int64_t docs, int64_t tokens, int64_t text_bytes, double fraction) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < (terminal_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10000))) return;
  last_print_ = now;
  print(docs, tokens, text_bytes, fraction, false);
}

double ProgressMeter::finish(int64_t docs, int64_t tokens, int64_t text_bytes) {
  if (enabled_) print(docs, tokens, text_bytes, 1.0, true);
  return elapsed_seconds();
}

std::string format_duration(double seconds) {
  char text[32];
  if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(text, sizeof text, "%dm%02ds", static_cast<int>(seconds / 60), static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(text, sizeof text, "%dh%02dm", static_cast<int>(seconds / 3600), static_cast<int>(seconds / 60) % 60);
  }
  return text;
}

void ProgressMeter::print(int64_t docs, int64_t tokens, int64_t text_bytes, double fraction, bool final) {
  const double seconds = elapsed_seconds();
  const double mb = static_cast<double>(text_bytes) / 1e6;
  std::string bar, eta;
  if (fraction >= 0) {
    constexpr int kWidth = 20;
    const double f = std::min(1.0, fraction);
    const int filled = static_cast<int>(f * kWidth);
    char percent[16];
    std::snprintf(percent, sizeof percent, "] %3d%%  ", static_cast<int>(f * 100));
    bar = "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kWidth - filled), '.') +
          percent;
    if (!final && f > 0) eta = "  ETA " + format_duration(seconds * (1 - f) / f);
  }
  const double rate = seconds > 0 ? 1 / seconds : 0;
  std::fprintf(stderr, "%s%s: %s%s docs  %.2fM tokens  %.1f MB text  %.1f MB/s  %.2fM tokens/s  %s%s%s",
               terminal_ ? "\r\033[K" : "", label_.c_str(), bar.c_str(), with_commas(docs).c_str(),
               static_cast<double>(tokens) / 1e6, mb, mb * rate, static_cast<double>(tokens) / 1e6 * rate,
               format_duration(seconds).c_str(), eta.c_str(), terminal_ && !final ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace linea::data
