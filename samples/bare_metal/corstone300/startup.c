/* bare_metal's start-up on the Corstone-300: the vector table, then zeroed .bss, the FPU and
 * Helium (MVE) switched on, newlib's semihosting handles and the static constructors (ExecuTorch
 * registers the kernels from one), main, and exit with main's status through semihosting. */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t __bss_start__, __bss_end__, __stack_top;
extern int main(void);
extern void initialise_monitor_handles(void);
extern void __libc_init_array(void);

__attribute__((noreturn)) void reset(void)
{
    for (uint32_t *word = &__bss_start__; word < &__bss_end__; ++word) *word = 0;
    /* CPACR: full access to coprocessors 10 and 11, the FPU and MVE */
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
    __asm volatile("dsb\n\tisb" ::: "memory");
    initialise_monitor_handles();
    __libc_init_array();
    exit(main());
}

/* Any fault or unexpected interrupt: exit with a status the host sees. */
__attribute__((noreturn)) static void fault(void) { exit(0x7f); }

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))&__stack_top, reset, fault, fault, fault, fault, fault, fault,
    0, 0, 0, fault, fault, 0, fault, fault,
};
