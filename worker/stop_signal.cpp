#include "worker/stop_signal.h"

#include <csignal>

namespace linea {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) std::signal(sig, SIG_DFL);
  g_signal = sig;
}
}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal() { return g_signal; }
void clear_stop_signal() { g_signal = 0; }

}  // namespace linea
