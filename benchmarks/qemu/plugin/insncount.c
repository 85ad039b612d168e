/* insncount: exact guest-instruction counts between two marker functions.
 * Guest calls bench_start() / bench_stop() (single-instruction `bx lr` functions, noinline).
 * Each executed TB adds its instruction count via one callback; a marker inside a TB snapshots
 * total + (marker index within TB), so a region = insns from bench_start's first insn (inclusive)
 * up to bench_stop's first insn (exclusive). Single vCPU only.
 * args: start=<hexaddr>,stop=<hexaddr> (optional; default: match symbols bench_start/bench_stop)
 *       vec=on      also count coprocessor-space (FP/MVE) instructions per region
 *       symbols=on  also print, per region, the instructions executed in each function symbol
 *                   ("insncount: symbol <name> = N", most first); outside any symbol: "?" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qemu_plugin_v1.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

static uint64_t total, t_start, nregions, vtotal, v_start;
static int count_vec; /* arg vec=on: also count coprocessor-space (FP/MVE) insns per region */
static uint64_t addr_start = ~0ull, addr_stop = ~0ull;

/* --- per-symbol counts (symbols=on) ------------------------------------------------------- */
static int count_symbols, in_region;
struct sym { const char *name; uint64_t count; };
#define NSYMS 8192
static struct sym syms[NSYMS];
static struct sym *sym_of(const char *name)
{
    if (!name) name = "?";
    uint32_t h = 2166136261u;
    for (const char *c = name; *c; ++c) h = (h ^ (uint8_t)*c) * 16777619u;
    for (uint32_t i = 0; i < NSYMS; ++i) {
        struct sym *s = &syms[(h + i) % NSYMS];
        if (!s->name) { s->name = strdup(name); return s; }
        if (!strcmp(s->name, name)) return s;
    }
    return &syms[0];
}
/* A translated block's instructions grouped by symbol. */
struct tb_syms { uint32_t n; struct { struct sym *s; uint32_t count; } g[]; };
static void tb_exec_syms(unsigned int vcpu, void *udata)
{
    if (!in_region) return;
    struct tb_syms *t = udata;
    for (uint32_t i = 0; i < t->n; ++i) t->g[i].s->count += t->g[i].count;
}
static int by_count(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}
static void print_symbols(void)
{
    static struct sym sorted[NSYMS];
    size_t n = 0;
    for (size_t i = 0; i < NSYMS; ++i)
        if (syms[i].name && syms[i].count) { sorted[n++] = syms[i]; syms[i].count = 0; }
    qsort(sorted, n, sizeof sorted[0], by_count);
    for (size_t i = 0; i < n; ++i) {
        char buf[256];
        snprintf(buf, sizeof buf, "insncount: symbol %s = %llu\n", sorted[i].name,
                 (unsigned long long)sorted[i].count);
        qemu_plugin_outs(buf);
    }
}

/* udata encodes: n insns (bits 0..15), marker kind (16..17: 0 none,1 start,2 stop), marker idx (32..47) */
static void tb_exec(unsigned int vcpu, void *udata)
{
    uintptr_t u = (uintptr_t)udata;
    uint64_t n = u & 0xffff, kind = (u >> 16) & 3, idx = (u >> 32) & 0xffff, nv = (u >> 18) & 0x3fff;
    if (kind == 1) {
        t_start = total + idx; v_start = vtotal; in_region = 1;
    } else if (kind == 2) {
        in_region = 0;
        char buf[128];
        if (count_vec)
            snprintf(buf, sizeof buf, "insncount: region %llu = %llu insns (of which FP/MVE: %llu)\n",
                     (unsigned long long)nregions++, (unsigned long long)(total + idx - t_start),
                     (unsigned long long)(vtotal - v_start));
        else
            snprintf(buf, sizeof buf, "insncount: region %llu = %llu insns\n",
                     (unsigned long long)nregions++, (unsigned long long)(total + idx - t_start));
        qemu_plugin_outs(buf);
        if (count_symbols) print_symbols();
    }
    total += n; vtotal += nv;
}

static int marker_kind(struct qemu_plugin_insn *insn)
{
    uint64_t va = qemu_plugin_insn_vaddr(insn);
    if (va == addr_start) return 1;
    if (va == addr_stop) return 2;
    if (addr_start == ~0ull) {
        const char *s = qemu_plugin_insn_symbol(insn);
        if (s && !strcmp(s, "bench_start")) return 1;
        if (s && !strcmp(s, "bench_stop")) return 2;
    }
    return 0;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    uintptr_t u = n & 0xffff;
    for (size_t i = 0; i < n; i++) {
        int k = marker_kind(qemu_plugin_tb_get_insn(tb, i));
        if (k && !(u & (3u << 16))) u |= ((uintptr_t)k << 16) | ((uintptr_t)i << 32);
        if (count_vec) {
            /* qemu 7.2's (capstone) disassembler does not decode v8.1-M, so classify by encoding:
             * 32-bit T32 with first halfword 111x11xx xxxxxxxx = coprocessor space = FP + MVE. */
            struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
            const uint8_t *b = qemu_plugin_insn_data(in);
            uint16_t hw0 = b[0] | (b[1] << 8);
            if (qemu_plugin_insn_size(in) == 4 && (hw0 & 0xEC00) == 0xEC00) u += (uintptr_t)1 << 18;
        }
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)u);
    if (count_symbols) {
        /* Registered after tb_exec, so a region's marker blocks set in_region first. */
        struct tb_syms *t = calloc(1, sizeof *t + n * sizeof t->g[0]);
        for (size_t i = 0; i < n; i++) {
            struct sym *s = sym_of(qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, i)));
            if (t->n && t->g[t->n - 1].s == s) t->g[t->n - 1].count++;
            else { t->g[t->n].s = s; t->g[t->n].count = 1; t->n++; }
        }
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec_syms, QEMU_PLUGIN_CB_NO_REGS, t);
    }
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    char buf[96];
    snprintf(buf, sizeof buf, "insncount: total = %llu insns\n", (unsigned long long)total);
    qemu_plugin_outs(buf);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "start=", 6)) addr_start = strtoull(argv[i] + 6, NULL, 0) & ~1ull;
        else if (!strcmp(argv[i], "vec=on")) count_vec = 1;
        else if (!strcmp(argv[i], "symbols=on")) count_symbols = 1;
        else if (!strncmp(argv[i], "stop=", 5)) addr_stop = strtoull(argv[i] + 5, NULL, 0) & ~1ull;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
