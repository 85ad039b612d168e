// The ztest stand-in's control (tests/zephyr/test_host_apps.py): one test passes, one fails
// an assertion with a message, one fails without one; the run must report both failures.
#include <zephyr/ztest.h>

ZTEST_SUITE(stand_in, NULL, NULL, NULL, NULL, NULL);

ZTEST(stand_in, test_passes) { zassert_equal(1 + 1, 2); }

ZTEST(stand_in, test_fails_with_a_message) { zassert_true(1 + 1 == 3, "sum %d", 1 + 1); }

ZTEST(stand_in, test_fails_without_one) {
  static int value = 0;
  zassert_is_null(&value);
}
