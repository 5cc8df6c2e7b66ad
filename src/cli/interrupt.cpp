// SIGINT state. A signal handler cannot be given context, so this is the one place the CLI keeps
// process-wide state: three lock-free atomics, written by the handler (on whichever thread the
// kernel picks) and read by the main thread between blocking calls.
#include "cli/interrupt.h"

#include <csignal>

namespace sluice::cli {
namespace {

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");

std::atomic<bool> g_busy{false};    // an answer is being generated
std::atomic<bool> g_cancel{false};  // the flag Session::generate polls
std::atomic<bool> g_exit{false};    // a second Ctrl-C within one answer
std::atomic<int> g_idle{0};         // Ctrl-Cs while idle, not yet seen by the main thread

void on_sigint(int /*signal*/) {
  if (g_busy.load()) {
    if (g_cancel.exchange(true)) g_exit.store(true);
  } else {
    g_idle.fetch_add(1);
  }
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction action = {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a read blocked on the terminal returns EINTR
  sigaction(SIGINT, &action, nullptr);
}

const std::atomic<bool>* begin_answer() {
  g_cancel.store(false);
  g_busy.store(true);
  return &g_cancel;
}

bool end_answer() {
  g_busy.store(false);
  return g_cancel.load();
}

bool exit_requested() {
  return g_exit.load();
}

int take_idle_interrupts() {
  return g_idle.exchange(0);
}

}  // namespace sluice::cli
