/* Host stand-in for <zephyr/sys/printk.h>. */
#ifndef CORTEX_M_NN_HOST_ZEPHYR_PRINTK_H
#define CORTEX_M_NN_HOST_ZEPHYR_PRINTK_H

#include <stdio.h>

#define printk printf

#endif
