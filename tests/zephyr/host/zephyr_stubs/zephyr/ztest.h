/* Host stand-in for <zephyr/ztest.h>: only what tests/zephyr/kernels/src/main.cpp uses, with
 * ztest's semantics (subsys/testsuite/ztest/include/zephyr/ztest_test.h, ztest_assert.h):
 * ZTEST_SUITE's setup runs once before the suite's tests, each ZTEST runs in order, and a
 * failing zassert_* (message optional, printf-style) fails its test and leaves it. main() is
 * ztest_main.cpp's. C++ only: the suite is a .cpp. */
#ifndef CORTEX_M_NN_HOST_ZEPHYR_ZTEST_H
#define CORTEX_M_NN_HOST_ZEPHYR_ZTEST_H

#include <setjmp.h>
#include <stddef.h>
#include <string.h>

namespace ztest_stand_in {

using Test = void (*)(void);
using Setup = void *(*)(void);

/* Registers a suite's setup and its tests; reports and leaves a failing assertion. */
struct Registry {
	static void suite(const char *name, Setup setup);
	static void test(const char *suite, const char *name, Test body);
	[[noreturn]] static void fail(const char *file, int line, const char *what,
				      const char *format, ...);
};

struct SuiteEntry {
	SuiteEntry(const char *name, Setup setup) { Registry::suite(name, setup); }
};

struct TestEntry {
	TestEntry(const char *suite, const char *name, Test body)
	{
		Registry::test(suite, name, body);
	}
};

} /* namespace ztest_stand_in */

/* before, after and teardown: none of ours has them (the stand-in refuses one at run time). */
#define ZTEST_SUITE(name, predicate, setup, before, after, teardown)                               \
	static_assert((predicate) == NULL && (before) == NULL && (after) == NULL &&               \
			      (teardown) == NULL,                                                  \
		      "the ztest stand-in runs setup only");                                      \
	static ztest_stand_in::SuiteEntry ztest_suite_##name(#name, setup)

#define ZTEST(suite, fn)                                                                           \
	static void suite##_##fn(void);                                                            \
	static ztest_stand_in::TestEntry ztest_test_##suite##_##fn(#suite, #fn, suite##_##fn);    \
	static void suite##_##fn(void)

#define ZTEST_STAND_IN_CHECK(cond, what, ...)                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			ztest_stand_in::Registry::fail(__FILE__, __LINE__, what, "" __VA_ARGS__);  \
		}                                                                                  \
	} while (0)

#define zassert_true(cond, ...) ZTEST_STAND_IN_CHECK(cond, #cond, __VA_ARGS__)
#define zassert_equal(a, b, ...) ZTEST_STAND_IN_CHECK((a) == (b), #a " == " #b, __VA_ARGS__)
#define zassert_is_null(ptr, ...) ZTEST_STAND_IN_CHECK((ptr) == NULL, #ptr " is NULL", __VA_ARGS__)
#define zassert_mem_equal(a, b, size, ...)                                                         \
	ZTEST_STAND_IN_CHECK(memcmp(a, b, size) == 0, #a " equals " #b, __VA_ARGS__)

#endif
