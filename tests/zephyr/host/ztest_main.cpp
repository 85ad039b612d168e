// main() of the host ztest stand-in (zephyr_stubs/zephyr/ztest.h): each suite's setup, then
// its tests in order, each failing assertion reported; "PROJECT EXECUTION SUCCESSFUL" (what
// Twister's ztest harness looks for) and exit status 0 only when every test passed.
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <zephyr/ztest.h>

namespace ztest_stand_in {
namespace {

constexpr int kMax = 64;
struct Suite {
  const char* name;
  Setup setup;
};
struct Case {
  const char* suite;
  const char* name;
  Test body;
};
Suite suites[kMax];
Case tests[kMax];
int suite_count = 0;
int test_count = 0;
jmp_buf leave;  // where a failing assertion returns to

}  // namespace

void Registry::suite(const char* name, Setup setup) {
  if (suite_count < kMax) suites[suite_count++] = {name, setup};
}

void Registry::test(const char* suite, const char* name, Test body) {
  if (test_count < kMax) tests[test_count++] = {suite, name, body};
}

void Registry::fail(const char* file, int line, const char* what, const char* format, ...) {
  printf("    Assertion failed at %s:%d: %s", file, line, what);
  if (format[0] != '\0') {
    va_list arguments;
    va_start(arguments, format);
    printf(": ");
    vprintf(format, arguments);
    va_end(arguments);
  }
  printf("\n");
  longjmp(leave, 1);
}

}  // namespace ztest_stand_in

namespace {

// Whether `body` returns without a failing assertion (one longjmps back here).
bool passes(void (*body)(void)) {
  if (setjmp(ztest_stand_in::leave) != 0) {
    return false;
  }
  body();
  return true;
}

ztest_stand_in::Setup setup_to_run = nullptr;
void run_setup() { setup_to_run(); }

}  // namespace

int main() {
  using namespace ztest_stand_in;
  int failed = 0;
  for (int s = 0; s < suite_count; ++s) {
    printf("Running TESTSUITE %s\n", suites[s].name);
    setup_to_run = suites[s].setup;
    if (setup_to_run != nullptr && !passes(run_setup)) {
      printf("TESTSUITE %s setup failed\n", suites[s].name);
      ++failed;
      continue;
    }
    for (int t = 0; t < test_count; ++t) {
      if (strcmp(tests[t].suite, suites[s].name) != 0) continue;
      const bool passed = passes(tests[t].body);
      printf(" %s - %s\n", passed ? "PASS" : "FAIL", tests[t].name);
      failed += passed ? 0 : 1;
    }
  }
  printf("%s\n", failed == 0 && test_count > 0 ? "PROJECT EXECUTION SUCCESSFUL"
                                               : "PROJECT EXECUTION FAILED");
  return failed == 0 && test_count > 0 ? 0 : 1;
}
