/* Stand-in for <zephyr/ztest.h> when compiling for a Cortex-M without Zephyr: the suite and
 * test definitions (subsys/testsuite/ztest/include/zephyr/ztest_test.h: a test body is a
 * `static void suite_fn(void)`, the suite names setup/before/after/teardown functions) and
 * the assertions the kernel test uses (ztest_assert.h: the message is optional and checked as
 * a printf format). Compiled, never linked. */
#ifndef CORTEX_M_NN_STAND_IN_ZEPHYR_ZTEST_H
#define CORTEX_M_NN_STAND_IN_ZEPHYR_ZTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ztest_stand_in_suite {
	const char *name;
	bool (*predicate)(const void *state);
	void *(*setup)(void);
	void (*before)(void *fixture);
	void (*after)(void *fixture);
	void (*teardown)(void *fixture);
};

void ztest_stand_in_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif

#define ZTEST_SUITE(suite, predicate, setup, before, after, teardown)                            \
	extern const struct ztest_stand_in_suite ztest_stand_in_suite_##suite;                   \
	const struct ztest_stand_in_suite ztest_stand_in_suite_##suite = {                       \
		#suite, predicate, setup, before, after, teardown}

#define ZTEST(suite, fn)                                                                         \
	static void suite##_##fn(void);                                                          \
	extern void (*const ztest_stand_in_test_##suite##_##fn)(void);                           \
	void (*const ztest_stand_in_test_##suite##_##fn)(void) = suite##_##fn;                   \
	static void suite##_##fn(void)

#define zassert_true(cond, ...)                                                                  \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			ztest_stand_in_fail(__FILE__, __LINE__, "" __VA_ARGS__);                 \
		}                                                                                \
	} while (0)
#define zassert_equal(a, b, ...) zassert_true((a) == (b), __VA_ARGS__)
#define zassert_is_null(p, ...) zassert_true((p) == NULL, __VA_ARGS__)
#define zassert_mem_equal(a, b, size, ...) zassert_true(memcmp((a), (b), (size)) == 0, __VA_ARGS__)

#endif
