// Ctrl-C for `sluice run`: during an answer it sets the cancel flag the Session polls; while
// idle it is counted for the chat loop to act on. The handler only touches lock-free atomics;
// everything else (notes, timing, exiting) happens on the main thread.
#pragma once

#include <atomic>

namespace sluice::cli {

// Installs the SIGINT handler (sigaction, without SA_RESTART so a blocked read wakes up).
void install_interrupt_handler();

// Marks an answer as running and returns the flag to pass to Session::generate (cleared).
const std::atomic<bool>* begin_answer();
// Ends the answer; true when Ctrl-C cancelled it.
bool end_answer();
// True once Ctrl-C came a second time during one answer: the user wants out, not just a stop.
bool exit_requested();
// Ctrl-Cs that arrived while idle since the last call (and resets the count).
int take_idle_interrupts();

}  // namespace sluice::cli
