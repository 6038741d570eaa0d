// Shared main for every GoogleTest binary: sets up stack-trace symbolization (the leak
// tracker's reports name functions) before any test runs.
#include "gtest/gtest.h"
#include "memory/leak_tracker.h"

int main(int argc, char** argv) {
  ndserve::InitializeSymbolizer(argv[0]);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
