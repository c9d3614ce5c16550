// FUZZ_CHECK(cond, what): a property of a fuzz target; when it fails the target
// prints `what` and aborts, which libFuzzer (and the corpus replay of the
// gcc build, fuzz_replay_main.cc) report as a crash with the input that did it.
#ifndef SPLITSPEC_TESTS_FUZZ_FUZZ_CHECK_H_
#define SPLITSPEC_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                                    \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "%s:%d: property failed: %s (%s)\n", __FILE__, __LINE__, #cond, what); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (0)

#endif  // SPLITSPEC_TESTS_FUZZ_FUZZ_CHECK_H_
