// sluice: the command-line entry. It only dispatches to one subcommand per file; every
// subcommand uses the public API in include/sluice and nothing below it.
#include <cstdio>

#include "sluice/version.h"

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  std::printf("sluice %s\n", sluice::version());
  return 0;
}
