// depthwise_conv_lanes_s8's inner loops on MVE, in inline assembly (included once, by
// depthwise_conv_lanes_s8.cpp, inside its anonymous namespace after kKernel): the
// multiply-accumulates of a kernel row and the requantization of a block of four channels.
// GCC 12 schedules the loads of a whole window before their multiplies, which needs more than
// MVE's eight vector registers, and spills; here every address is a register plus an
// immediate and nothing is spilled.
#pragma once

// One kernel row of four pixels kStride apart: a_p += row[4 (p kStride + k)] * weights[4 k]
// for the three taps k, every input and weight read at an immediate offset. Inline assembly,
// as the requantization below: GCC 12 schedules the loads of a whole window before their
// multiplies, which needs more than MVE's eight vector registers, and spills.
template <int kStride>
inline void mac_row4(const int8_t* row, const int8_t* weights, int32x4_t& a0, int32x4_t& a1,
                     int32x4_t& a2, int32x4_t& a3) {
  int32x4_t w;
  int32x4_t x;
#define CMNN_MAC(p, k)                                      \
  "vldrb.s32 %q[x], [%[in], #4*(" #p "*%c[s]+" #k ")]\n"     \
  "vmul.i32 %q[x], %q[x], %q[w]\n"                          \
  "vadd.i32 %q[a" #p "], %q[a" #p "], %q[x]\n"
#define CMNN_TAP(k)                                         \
  "vldrb.s32 %q[w], [%[wp], #" #k "*4]\n"                   \
  CMNN_MAC(0, k) CMNN_MAC(1, k) CMNN_MAC(2, k) CMNN_MAC(3, k)
  __asm__(CMNN_TAP(0) CMNN_TAP(1) CMNN_TAP(2)
          : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3), [w] "=&w"(w),
            [x] "=&w"(x)
          : [in] "l"(row), [wp] "l"(weights), [s] "i"(kStride), "m"(*row), "m"(*weights));
#undef CMNN_TAP
#undef CMNN_MAC
}

// The same for one pixel.
inline void mac_row1(const int8_t* row, const int8_t* weights, int32x4_t& a0) {
  int32x4_t w;
  int32x4_t x;
#define CMNN_TAP(k)                                         \
  "vldrb.s32 %q[w], [%[wp], #" #k "*4]\n"                   \
  "vldrb.s32 %q[x], [%[in], #" #k "*4]\n"                   \
  "vmul.i32 %q[x], %q[x], %q[w]\n"                          \
  "vadd.i32 %q[a0], %q[a0], %q[x]\n"
  __asm__(CMNN_TAP(0) CMNN_TAP(1) CMNN_TAP(2)
          : [a0] "+w"(a0), [w] "=&w"(w), [x] "=&w"(x)
          : [in] "l"(row), [wp] "l"(weights), "m"(*row), "m"(*weights));
#undef CMNN_TAP
}

// The output arithmetic after the sum: output_offset, activation_min, activation_max.
struct Output {
  int32_t offset;
  int32_t low;
  int32_t high;
};

// Per lane: requantize with CMSIS-NN's arithmetic (arm_requantize_mve_32x4, this build's
// rounding; registers L, N: the shifts it derives from `shift`, M: the multiplier, T: a
// temporary), add the output offset, clamp, store four bytes at `out` and step it to the next
// pixel.
#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
#define CMNN_SHIFTS                                         \
  "vldrw.u32 %q[L], [%[sh]]\n"                              \
  "vmov.i8 %q[T], #0xff\n"                                  \
  "vmin.s32 %q[N], %q[L], %q[T]\n"                          \
  "vqsub.s32 %q[L], %q[L], %q[N]\n"
#define CMNN_SCALE(a)                                       \
  "vshl.s32 %q[" a "], %q[" a "], %q[L]\n"                  \
  "vqdmulh.s32 %q[" a "], %q[" a "], %q[M]\n"               \
  "vrshl.s32 %q[" a "], %q[" a "], %q[N]\n"
#else
#define CMNN_SHIFTS                                         \
  "vldrw.u32 %q[L], [%[sh]]\n"                              \
  "vmov.i32 %q[T], #0\n"                                    \
  "vmin.s32 %q[N], %q[L], %q[T]\n"                          \
  "vmax.s32 %q[L], %q[L], %q[T]\n"
#define CMNN_SCALE(a)                                       \
  "vshl.s32 %q[" a "], %q[" a "], %q[L]\n"                  \
  "vqrdmulh.s32 %q[" a "], %q[" a "], %q[M]\n"              \
  "vand %q[T], %q[" a "], %q[N]\n"                          \
  "vshr.s32 %q[T], %q[T], #31\n"                            \
  "vqadd.s32 %q[" a "], %q[" a "], %q[T]\n"                 \
  "vrshl.s32 %q[" a "], %q[" a "], %q[N]\n"
#endif
#define CMNN_OUT(a)                                         \
  CMNN_SCALE(a)                                             \
  "vadd.i32 %q[" a "], %q[" a "], %[off]\n"                 \
  "vdup.32 %q[T], %[lo]\n"                                  \
  "vmax.s32 %q[" a "], %q[" a "], %q[T]\n"                  \
  "vdup.32 %q[T], %[hi]\n"                                  \
  "vmin.s32 %q[" a "], %q[" a "], %q[T]\n"                  \
  "vstrb.32 %q[" a "], [%[out]]\n"                          \
  "add %[out], %[out], %[step]\n"
#define CMNN_OUT_OPERANDS                                                                  \
  [M] "=&w"(m), [L] "=&w"(l), [N] "=&w"(n), [T] "=&w"(t), [off] "=&r"(off), [lo] "=&r"(lo), \
      [hi] "=&r"(hi), [out] "+l"(out)
// The "m" operands name the memory the block reads; the "memory" clobber already covers it.
// Unoptimised (-O0, a debug build) each would take a register of its own and the block could
// not be allocated ("impossible constraints"), so they are left out there.
#if defined(__OPTIMIZE__)
#define CMNN_OUT_INPUTS                                                                      \
  [sh] "r"(shift), [mq] "r"(multiplier), [o] "r"(&output), [step] "r"(step), "m"(*shift),     \
      "m"(*multiplier), "m"(output)
#else
#define CMNN_OUT_INPUTS \
  [sh] "r"(shift), [mq] "r"(multiplier), [o] "r"(&output), [step] "r"(step)
#endif
#define CMNN_OUT_LOAD                                       \
  CMNN_SHIFTS                                               \
  "vldrw.u32 %q[M], [%[mq]]\n"                              \
  "ldr %[off], [%[o]]\n"                                    \
  "ldr %[lo], [%[o], #4]\n"                                 \
  "ldr %[hi], [%[o], #8]\n"

// Requantizes four pixels' accumulators of one block and stores them `step` bytes apart.
inline void store4(int32x4_t a0, int32x4_t a1, int32x4_t a2, int32x4_t a3,
                   const int32_t* multiplier, const int32_t* shift, const Output& output,
                   int32_t step, int8_t* out) {
  int32x4_t m, l, n, t;
  int32_t off, lo, hi;
  __asm__ volatile(CMNN_OUT_LOAD CMNN_OUT("a0") CMNN_OUT("a1") CMNN_OUT("a2") CMNN_OUT("a3")
                   : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3),
                     CMNN_OUT_OPERANDS
                   : CMNN_OUT_INPUTS
                   : "memory");
}

// The same for one pixel.
inline void store1(int32x4_t a0, const int32_t* multiplier, const int32_t* shift,
                   const Output& output, int32_t step, int8_t* out) {
  int32x4_t m, l, n, t;
  int32_t off, lo, hi;
  __asm__ volatile(CMNN_OUT_LOAD CMNN_OUT("a0")
                   : [a0] "+w"(a0), CMNN_OUT_OPERANDS
                   : CMNN_OUT_INPUTS
                   : "memory");
}
#undef CMNN_SHIFTS
#undef CMNN_SCALE
#undef CMNN_OUT
#undef CMNN_OUT_OPERANDS
#undef CMNN_OUT_INPUTS
#undef CMNN_OUT_LOAD

