// Fast path of add_s8 (see fast.h), included by portable/elementwise/binary_s8.cc only: ADD
// of two operands of the output's shape (a residual connection).
//
// TFLite's ADD rescales each input on its own: x' = requantize((x + offset)
// * 2^left_shift, m, s), a function of the int8 value x alone, so it is
// tabulated (256 int32s on the stack, built once per call). The input with
// the larger scale has m = 2^30 and s = 0 (TFLite's multiplier 0.5), which
// makes its x' the exact shift (x + offset) * 2^(left_shift - 1): that one
// is not tabulated but multiplied in, the other input's offset term folded
// into its table: sum = T[b] + a * 2^k. The output is
//   clamp(RHA(RDM(sum, mo), e) + zo)
// with RDM the rounding doubling high multiply and RHA the rounding right
// shift by e = -output_shift, half away from zero (requantize()). RHA(h, e)
// = floor((h - [h < 0] + 2^(e-1)) / 2^e), and [h < 0] may be read as
// [sum < 0]: they differ only at h = 0, where the floor is 0 either way
// (e >= 1). The fast path takes output shifts < 0 (TFLite's: the output
// multiplier is twice the larger input scale over 2^20 output scales) and
// sums whose magnitude stays below 2^30 (the tables' bound, checked),
// and returns false for anything else.
//
// MVE: 16 elements per step, in four vectors of 4 int32 lanes: the
// tabulated input's bytes widened to gather offsets, VMLA for the other
// input, then VQRDMLAH (the sign term plus RDM) and VRSHL (round and
// shift), saturating narrowing to int16 (where zo is added, saturating) and
// to int8, and one scatter store restoring the elements' order.
// DSP: per element a table load, MLA, SMMULR (RDM of the doubled sum: the
// tables hold 2 * T, the slope is 2^(k+1)), the rounding shift and SSAT.
#ifndef TORCHMCU_KERNELS_FAST_ELEMENTWISE_BINARY_S8_H_
#define TORCHMCU_KERNELS_FAST_ELEMENTWISE_BINARY_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include "kernels/portable/common/requantize.h"
#include "kernels/portable/elementwise/elementwise.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

// Compiled for speed whatever the image's -O (see conv/conv2d_s8.h).
#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// Fewer elements than this run the generic kernel: the table costs about
// as much as this many elements save.
constexpr int32_t kAddTableMin = 256;

// The setup of the fast ADD: which input is the shift one, its shift k and
// the other input's table (T[u] for the int8 value u read as uint8: sum = T[b]
// + a * 2^k, scaled by `scale` (1, or 2 for SMMULR)).
struct AddPlan {
  bool lhs_shifted;  // a is input 1 (else input 2 and the operands swap)
  int32_t k;
  int32_t e;  // -output_shift
};

// input' = (x + offset) * 2^k exactly for every int8 x: m = 2^30 and a
// shift s with left_shift - 1 + s >= 0 (RDM halves the left shift exactly,
// RHA then divides exactly).
inline bool shift_input(int32_t m, int32_t s, int32_t left_shift, int32_t* k) {
  *k = left_shift - 1 + s;
  return m == (1 << 30) && left_shift >= 1 && *k >= 0 && *k <= 22;
}

#if TMCU_S8_MVE

// table[u] = scale * (requantize((int8(u) + offset) * 2^left_shift, m, s) +
// bias), 4 lanes at a time (requant_v is requantize() here: s <= 0, the
// load-time check's); returns the largest |requantize(..) + bias|.
inline int64_t add_table(int32_t m, int32_t s, int32_t left_shift, int32_t offset, int32_t bias, int32_t scale,
                         int32_t* table) {
  const int32x4_t mv = vdupq_n_s32(m), sv = vdupq_n_s32(s);
  uint32_t most = 0;
  for (uint32_t u = 0; u < 256; u += 4) {
    // The int8 values of the bytes u .. u + 3.
    const int32x4_t x = vshrq_n_s32(vshlq_n_s32(vreinterpretq_s32_u32(vidupq_n_u32(u, 1)), 24), 24);
    const int32x4_t v = vaddq_n_s32(requant_v(vshlq_r_s32(vaddq_n_s32(x, offset), left_shift), mv, sv), bias);
    most = vmaxavq_s32(most, v);
    vstrwq_s32(table + u, vmulq_n_s32(v, scale));
  }
  return most;
}

#else

// As the MVE add_table, one value at a time: requantize() for s <= 0 (the
// load-time check's), its rounding shift as fc_out's in conv/linear_s8.h.
inline int64_t add_table(int32_t m, int32_t s, int32_t left_shift, int32_t offset, int32_t bias, int32_t scale,
                         int32_t* table) {
  int64_t most = 0;
  for (int32_t u = 0; u < 256; ++u) {
    const int32_t x = (static_cast<int8_t>(u) + offset) * (1 << left_shift);
    int32_t h = static_cast<int32_t>((static_cast<int64_t>(x) * m + (int64_t{1} << 30)) >> 31);
    if (s < 0) {
      const int32_t t = h - static_cast<int32_t>(static_cast<uint32_t>(h) >> 31);
      h = ((t >> (-s - 1)) + 1) >> 1;
    }
    const int64_t v = int64_t{h} + bias;
    const int64_t mag = v < 0 ? -v : v;
    most = mag > most ? mag : most;
    table[u] = static_cast<int32_t>(static_cast<uint32_t>(v) * static_cast<uint32_t>(scale));
  }
  return most;
}

#endif

// The plan and the table; false when the fast path cannot take the
// parameters (see the header comment).
inline bool add_plan(const QuantAddParams& p, int32_t scale, int32_t* table, AddPlan* plan) {
  if (p.output_shift >= 0 || p.output_multiplier < 0) return false;
  int32_t k;
  int32_t off_shift, off_table, m, s;
  if (shift_input(p.input1_multiplier, p.input1_shift, p.left_shift, &k)) {
    plan->lhs_shifted = true;
    off_shift = p.input1_offset;
    off_table = p.input2_offset;
    m = p.input2_multiplier;
    s = p.input2_shift;
  } else if (shift_input(p.input2_multiplier, p.input2_shift, p.left_shift, &k)) {
    plan->lhs_shifted = false;
    off_shift = p.input2_offset;
    off_table = p.input1_offset;
    m = p.input1_multiplier;
    s = p.input1_shift;
  } else {
    return false;
  }
  plan->k = k;
  plan->e = -p.output_shift;
  const int64_t most = add_table(m, s, p.left_shift, off_table, off_shift * (1 << k), scale, table);
  return most + (int64_t{128} << k) < (int64_t{1} << 30);
}

#if TMCU_S8_MVE

// Byte offsets of the scatter store: the narrowing chain leaves element
// 4i + j of a 16-element step in byte lane 4j + i's place (see below).
alignas(16) constexpr uint8_t kAddOrder[16] = {0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15};

// 16 elements per loop, GCC spilling otherwise. Per group of 4 (int32
// lanes): the table's values gathered at the tabulated input's bytes
// (VLDRW gather), plus the other input times 2^k (VMLA); -[sum < 0] +
// RDM(sum, mo) (VQRDMLAH into the sign, VSHR #31); the rounding shift right
// by e (VRSHL by down = -e). Groups 0 and 1 narrow (saturating) into the
// int16 lanes (0, 4, 1, 5, 2, 6, 3, 7) of one vector, groups 2 and 3 into
// (8, 12, 9, 13, ...) of another; zo is added (saturating), both narrow into
// the bytes (0, 8, 4, 12, 1, 9, ...) and a scatter store with kAddOrder puts
// them in place. 39 instructions per 16 elements (40 with a ReLU's clamp,
// 41 with both bounds).
#define TMCU_ADD_QUARTER \
        "vldrb.u32    %q[t0], [%[b]], #4\n\t" \
        "vldrw.u32    %q[t1], [%[table], %q[t0], uxtw #2]\n\t" \
        "vldrb.s32    %q[t0], [%[a]], #4\n\t" \
        "vmla.s32     %q[t1], %q[t0], %[slope]\n\t" \
        "vshr.s32     %q[t2], %q[t1], #31\n\t" \
        "vqrdmlah.s32 %q[t2], %q[t1], %[mo]\n\t" \
        "vrshl.s32    %q[t2], %[down]\n\t"

#define TMCU_ADD_LOOP(CLAMP)                                                                           \
  __asm__ volatile(                                                                                   \
      "dls          lr, %[n16]\n"                                                                     \
      "1:\n\t" TMCU_ADD_QUARTER "vqmovnb.s32  %q[lo16], %q[t2]\n\t" TMCU_ADD_QUARTER                     \
      "vqmovnt.s32  %q[lo16], %q[t2]\n\t"                                                              \
      "vqadd.s16    %q[lo16], %q[lo16], %[zo]\n\t" TMCU_ADD_QUARTER                                      \
      "vqmovnb.s32  %q[hi16], %q[t2]\n\t" TMCU_ADD_QUARTER "vqmovnt.s32  %q[hi16], %q[t2]\n\t"           \
      "vqadd.s16    %q[hi16], %q[hi16], %[zo]\n\t"                                                     \
      "vqmovnb.s16  %q[t0], %q[lo16]\n\t"                                                              \
      "vqmovnt.s16  %q[t0], %q[hi16]\n\t" CLAMP                                                        \
      "vstrb.8      %q[t0], [%[out], %q[order]]\n\t"                                                   \
      "add          %[out], %[out], #16\n\t"                                                           \
      "le           lr, 1b"                                                                           \
      : [a] "+l"(a), [b] "+l"(bu), [out] "+r"(out), [t0] "=&w"(t0), [t1] "=&w"(t1), [t2] "=&w"(t2),      \
        [lo16] "=&w"(lo16), [hi16] "=&w"(hi16)                                                        \
      : [n16] "r"(n16), [table] "r"(table), [slope] "r"(slope), [mo] "r"(mo), [down] "r"(down),          \
        [zo] "r"(zo32), [order] "w"(order), [vlo] "w"(lo), [vhi] "w"(hi)                                 \
      : "lr", "memory")

// The elements in whole steps of 16; returns the count done.
[[gnu::always_inline]] inline int32_t add_loop16(const int8_t*& a, const uint8_t*& bu, int8_t*& out, int32_t n,
                                                 const int32_t* table, int32_t slope, int32_t mo, int32_t down,
                                                 int32_t zo32, uint8x16_t order, int8_t act_min, int8_t act_max) {
  const int32_t n16 = n >> 4;
  if (n16 == 0) return 0;
  int32x4_t t0, t1, t2;
  int16x8_t lo16, hi16;
  const int8x16_t lo = vdupq_n_s8(act_min), hi = vdupq_n_s8(act_max);
  if (act_max < 127) {
    TMCU_ADD_LOOP("vmax.s8      %q[t0], %q[t0], %q[vlo]\n\t"
                  "vmin.s8      %q[t0], %q[t0], %q[vhi]\n\t");
  } else if (act_min > -128) {  // a ReLU's range: the saturation is the upper bound
    TMCU_ADD_LOOP("vmax.s8      %q[t0], %q[t0], %q[vlo]\n\t");
  } else {
    TMCU_ADD_LOOP("");
  }
  return n16 << 4;
}
#undef TMCU_ADD_LOOP
#undef TMCU_ADD_QUARTER

// The last n < 16 elements: the generic step, from copies (no load past the
// operands' ends), the store predicated.
[[gnu::always_inline]] inline int32x4_t add_out4(int32x4_t sum, int32_t mo, int32_t down) {
  return vrshlq_n_s32(vqrdmlahq_n_s32(vshrq_n_s32(sum, 31), sum, mo), down);
}

inline void add_tail(const int8_t* a, const uint8_t* bu, int8_t* out, int32_t n, const int32_t* table,
                     int32_t slope, int32_t mo, int32_t down, int32_t zo32, uint8x16_t order, int8_t act_min,
                     int8_t act_max) {
  alignas(16) int8_t ta[16] = {};
  alignas(16) uint8_t tb[16] = {};
  for (int32_t j = 0; j < n; ++j) {
    ta[j] = a[j];
    tb[j] = bu[j];
  }
  int32x4_t q[4];
  for (int j = 0; j < 4; ++j) {
    const int32x4_t sum =
        vmlaq_n_s32(vldrwq_gather_shifted_offset_s32(table, vldrbq_u32(tb + 4 * j)), vldrbq_s32(ta + 4 * j), slope);
    q[j] = add_out4(sum, mo, down);
  }
  const int16_t zo = static_cast<int16_t>(zo32);
  const int16x8_t lo16 = vqaddq_n_s16(vqmovntq_s32(vqmovnbq_s32(vdupq_n_s16(0), q[0]), q[1]), zo);
  const int16x8_t hi16 = vqaddq_n_s16(vqmovntq_s32(vqmovnbq_s32(vdupq_n_s16(0), q[2]), q[3]), zo);
  int8x16_t v = vqmovntq_s16(vqmovnbq_s16(vdupq_n_s8(0), lo16), hi16);
  v = vminq_s8(vmaxq_s8(v, vdupq_n_s8(act_min)), vdupq_n_s8(act_max));
  vstrbq_scatter_offset_p_s8(out, order, v, vcmphiq_u8(vdupq_n_u8(static_cast<uint8_t>(n)), order));
}

#endif

}  // namespace

#if TMCU_S8_MVE

[[gnu::noinline]] inline bool add_s8_same_shape(const int8_t* a, const int8_t* b, int8_t* out, int32_t n,
                                                const QuantAddParams& p) {
  if (n < kAddTableMin) return false;
  alignas(16) int32_t table[256];
  AddPlan plan;
  if (!add_plan(p, 1, table, &plan)) return false;
  if (!plan.lhs_shifted) {
    const int8_t* t = a;
    a = b;
    b = t;
  }
  const uint8_t* bu = reinterpret_cast<const uint8_t*>(b);
  const int32_t slope = 1 << plan.k;
  const int32_t mo = p.output_multiplier, down = -plan.e;
  const int8_t lo = static_cast<int8_t>(p.act_min), hi = static_cast<int8_t>(p.act_max);
  const uint8x16_t order = vldrbq_u8(kAddOrder);
  const int32_t done = add_loop16(a, bu, out, n, table, slope, mo, down, p.output_offset, order, lo, hi);
  if (done < n) add_tail(a, bu, out, n - done, table, slope, mo, down, p.output_offset, order, lo, hi);
  return true;
}

#else  // DSP

// One element: s2 = 2 * sum (the table and the slope are doubled);
// SMMULR(s2, mo) = RDM(sum, mo); then (h + 2^(e-1) + zo * 2^e - [sum < 0])
// >> e, saturated to int8 (SSAT), then clamped to the activation's range
// (CLAMP). 10 instructions; hand-scheduled (GCC spills the loop's
// invariants), 2 elements per loop.
#define TMCU_ADD_ONE(CLAMP)                    \
  "ldrb   %[t], [%[b]], #1\n\t"                \
  "ldrsb  %[s], [%[a]], #1\n\t"                \
  "ldr    %[t], [%[table], %[t], lsl #2]\n\t"  \
  "mla    %[s], %[s], %[slope], %[t]\n\t"      \
  "smmulr %[t], %[s], %[mo]\n\t"               \
  "add    %[t], %[t], %[round]\n\t"            \
  "sub    %[t], %[t], %[s], lsr #31\n\t"       \
  "asr    %[t], %[t], %[e]\n\t"                \
  "ssat   %[t], #8, %[t]\n\t" CLAMP            \
  "strb   %[t], [%[out]], #1\n\t"

#define TMCU_ADD_ASM(BODY, ...)                                                                              \
  __asm__ volatile(BODY                                                                                      \
                   : [a] "+r"(a), [b] "+r"(bu), [out] "+r"(out), [t] "=&r"(t), [s] "=&r"(s2)                 \
                   : [end] "r"(end), [table] "r"(table), [slope] "r"(slope2), [mo] "r"(mo), [round] "r"(round), \
                     [e] "r"(e) __VA_ARGS__                                                                  \
                   : "cc", "memory")

#define TMCU_ADD_MAX "cmp %[t], %[lo]\n\tit lt\n\tmovlt %[t], %[lo]\n\t"

// The n elements (clamped to [lo, hi] as they ask). 11 registers (12 with
// the lower bound alone): both bounds (rare on an ADD) run in C.
inline void add_loop(const int8_t* a, const uint8_t* bu, int8_t* out, int32_t n, const int32_t* table, int32_t slope2,
                     int32_t mo, int32_t round, int32_t e, int32_t lo, int32_t hi) {
  if (hi < 127) {
    for (int32_t i = 0; i < n; ++i) {
      const int32_t s = table[bu[i]] + a[i] * slope2;
      int32_t h;
      __asm__("smmulr %0, %1, %2" : "=r"(h) : "r"(s), "r"(mo));
      int32_t v = __ssat((h + round - static_cast<int32_t>(static_cast<uint32_t>(s) >> 31)) >> e, 8);
      v = v < lo ? lo : v;
      out[i] = static_cast<int8_t>(v > hi ? hi : v);
    }
    return;
  }
  const int8_t* const end = a + (n & ~1);
  int32_t t, s2;
  if (lo > -128) {
    if (a != end) TMCU_ADD_ASM("1:\n\t" TMCU_ADD_ONE(TMCU_ADD_MAX) TMCU_ADD_ONE(TMCU_ADD_MAX) "cmp %[a], %[end]\n\tbne 1b", , [lo] "r"(lo));
    if (n & 1) TMCU_ADD_ASM(TMCU_ADD_ONE(TMCU_ADD_MAX), , [lo] "r"(lo));
  } else {
    if (a != end) TMCU_ADD_ASM("1:\n\t" TMCU_ADD_ONE("") TMCU_ADD_ONE("") "cmp %[a], %[end]\n\tbne 1b");
    if (n & 1) TMCU_ADD_ASM(TMCU_ADD_ONE(""));
  }
}
#undef TMCU_ADD_MAX
#undef TMCU_ADD_ASM
#undef TMCU_ADD_ONE

[[gnu::noinline]] inline bool add_s8_same_shape(const int8_t* a, const int8_t* b, int8_t* out, int32_t n,
                                                const QuantAddParams& p) {
  if (n < kAddTableMin) return false;
  int32_t table[256];
  AddPlan plan;
  if (!add_plan(p, 2, table, &plan)) return false;
  // round = 2^(e-1) + zo * 2^e must leave room: |h| < 2^30.
  if (plan.e > 22) return false;
  if (!plan.lhs_shifted) {
    const int8_t* t = a;
    a = b;
    b = t;
  }
  const uint8_t* bu = reinterpret_cast<const uint8_t*>(b);
  const int32_t slope2 = 2 << plan.k;
  const int32_t mo = p.output_multiplier, e = plan.e;
  const int32_t round = (1 << (e - 1)) + p.output_offset * (1 << e);
  add_loop(a, bu, out, n, table, slope2, mo, round, e, p.act_min, p.act_max);
  return true;
}

#endif

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_ELEMENTWISE_BINARY_S8_H_
