// A graceful stop on SIGINT / SIGTERM: the handler only records the signal; the trainer polls
// stop_signal() between steps, writes a checkpoint and returns. A second signal of the same kind
// while stopping restores the default action, so it ends the process at once.
#pragma once

namespace linea {

void install_stop_signal_handlers();
int stop_signal();  // 0 while no stop was requested, else the signal number
void clear_stop_signal();

}  // namespace linea
