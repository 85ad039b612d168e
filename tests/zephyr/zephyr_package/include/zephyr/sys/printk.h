/* Stand-in for <zephyr/sys/printk.h>: its declaration, with the printf format checking Zephyr
 * gives printk (include/zephyr/sys/printk.h: __printf_like(1, 2)). */
#ifndef CORTEX_M_NN_STAND_IN_ZEPHYR_PRINTK_H
#define CORTEX_M_NN_STAND_IN_ZEPHYR_PRINTK_H

#ifdef __cplusplus
extern "C" {
#endif

void printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif
