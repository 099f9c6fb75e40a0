// conv2d_s8's fast path with the DSP extension (Cortex-M4, M7, M33): the
// GEMM of conv/conv2d_s8.h (which includes this file, after its shared
// helpers, and whose comment describes the method) with SMLAD on halfword
// pairs.
#ifndef TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_DSP_H_
#define TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_DSP_H_

#include <arm_acle.h>

#include <cstring>

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// One pixel's patch as int8s, before expand().
struct LinearPatch {
  int8_t* base;
  void put(int32_t k, const int8_t* src, int32_t n) const {
    int8_t* dst = base + k;
    for (; n >= 4; n -= 4, src += 4, dst += 4) {
      const int32_t v = load32(src);
      std::memcpy(dst, &v, 4);
    }
    for (; n > 0; --n) *dst++ = *src++;
  }
  void fill(int32_t k, int8_t v, int32_t n) const {
    int8_t* dst = base + k;
    const uint32_t v4 = static_cast<uint8_t>(v) * 0x01010101u;
    for (; n >= 4; n -= 4, dst += 4) std::memcpy(dst, &v4, 4);
    for (; n > 0; --n) *dst++ = v;
  }
};

// chunks words of int8s at src into a slot as (x0, x2), (x1, x3) halfword
// pairs plus the offset; the slot's chunks are stride words apart.
inline void expand(int32_t* dst, int32_t stride, const int8_t* src, int32_t chunks, int32_t off2) {
  for (int32_t c = 0; c < chunks; ++c, src += 4, dst += stride) {
    const int32_t v = load32(src);
    dst[0] = __sadd16(__sxtb16(v), off2);
    dst[1] = __sadd16(sxtb16_ror8(v), off2);
  }
}

// The last r = K % 4 weights of a row of K as a word (bytes r..3 zero),
// from the row's last whole word when there is one.
inline int32_t tail_word(const int8_t* row, int32_t K) {
  const int32_t r = K & 3;
  if (K >= 4) return static_cast<int32_t>(static_cast<uint32_t>(load32(row + K - 4)) >> (8 * (4 - r)));
  uint32_t v = 0;
  for (int32_t t = 0; t < r; ++t) v |= static_cast<uint32_t>(static_cast<uint8_t>(row[t])) << (8 * t);
  return static_cast<int32_t>(v);
}

// requantize() for a shift s <= 0 (e = -s, e1 = e - 1; e 0 returns the
// product's high part): floor((x * m + 2^30) / 2^31) is SMMULR of 2x and m,
// (2x * m + 2^31) >> 32, while 2x fits int32 (else requantize() itself),
// then the rounding shift right by e as requantize()'s.
[[gnu::always_inline]] inline int32_t requant_right(int32_t x, int32_t m, int32_t s, int32_t e, int32_t e1) {
  int32_t x2;
  if (__builtin_add_overflow(x, x, &x2)) return s8::requantize(x, m, s);
  int32_t hi;
  __asm__("smmulr %0, %1, %2" : "=r"(hi) : "r"(x2), "r"(m));
  if (e == 0) return hi;
  const int32_t t = hi + (hi >> 31);  // hi - (hi < 0)
  return (t >> e) + ((t >> e1) & 1);
}

// One chunk of the dot products below: the weights' word extended to the
// even and the odd halfword pairs, then per pixel one LDRD of its pairs and
// two SMLADs; the first pixel last, its load advancing x to the next chunk.
#define TMCU_DSP_W                     \
  "ldr %[wo], [%[w]], #4\n\t"          \
  "sxtb16 %[we], %[wo]\n\t"            \
  "sxtb16 %[wo], %[wo], ror #8\n\t"
#define TMCU_DSP_X(acc, off)                          \
  "ldrd %[t0], %[t1], [%[x], #" off "]\n\t"           \
  "smlad %[" acc "], %[t0], %[we], %[" acc "]\n\t"    \
  "smlad %[" acc "], %[t1], %[wo], %[" acc "]\n\t"
#define TMCU_DSP_X0(step)                             \
  "ldrd %[t0], %[t1], [%[x]], #" step "\n\t"          \
  "smlad %[a0], %[t0], %[we], %[a0]\n\t"              \
  "smlad %[a0], %[t1], %[wo], %[a0]\n\t"
#define TMCU_DSP_CHUNK4 TMCU_DSP_W TMCU_DSP_X("a1", "8") TMCU_DSP_X("a2", "16") TMCU_DSP_X("a3", "24") TMCU_DSP_X0("32")
#define TMCU_DSP_CHUNK2 TMCU_DSP_W TMCU_DSP_X("a1", "8") TMCU_DSP_X0("16")
// Two chunks per iteration, the first one alone when full is odd.
#define TMCU_DSP_LOOP(chunk)      \
  "tst %[full], #1\n\t"           \
  "beq 3f\n\t" chunk             \
  "3:\n\t"                        \
  "cmp %[w], %[end]\n\t"          \
  "beq 2f\n"                      \
  "1:\n\t" chunk chunk           \
  "cmp %[w], %[end]\n\t"          \
  "bne 1b\n"                      \
  "2:\n"

// a[i] = sum_k x_i[k] * w[k] over the G interleaved expanded patches at x:
// full whole chunks, then the tail chunk when K % 4 != 0.
// With kAcc, the sums are added to a's values.
template <int G, bool kAcc = false>
[[gnu::always_inline]] inline void dots(const int32_t* x, const int8_t* w, int32_t full, bool has_tail, int32_t tail,
                                        int32_t (&a)[G]) {
  static_assert(G == 2 || G == 4, "4 or 2 pixels");
  int32_t a0 = kAcc ? a[0] : 0, a1 = kAcc ? a[1] : 0, a2 = kAcc ? a[G - 2] : 0, a3 = kAcc ? a[G - 1] : 0;
  int32_t we, wo, t0, t1;
  const int8_t* const end = w + 4 * full;
  if (G == 4) {
    __asm__ volatile(TMCU_DSP_LOOP(TMCU_DSP_CHUNK4)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w),
                       [we] "=&r"(we), [wo] "=&r"(wo), [t0] "=&r"(t0), [t1] "=&r"(t1)
                     : [end] "r"(end), [full] "r"(full)
                     : "memory", "cc");
  } else {
    __asm__ volatile(TMCU_DSP_LOOP(TMCU_DSP_CHUNK2)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [x] "+r"(x), [w] "+r"(w), [we] "=&r"(we), [wo] "=&r"(wo),
                       [t0] "=&r"(t0), [t1] "=&r"(t1)
                     : [end] "r"(end), [full] "r"(full)
                     : "memory", "cc");
  }
  if (has_tail) {
    we = __sxtb16(tail);
    wo = sxtb16_ror8(tail);
    a0 = __smlad(x[0], we, a0);
    a0 = __smlad(x[1], wo, a0);
    a1 = __smlad(x[2], we, a1);
    a1 = __smlad(x[3], wo, a1);
    if (G == 4) {
      a2 = __smlad(x[4], we, a2);
      a2 = __smlad(x[5], wo, a2);
      a3 = __smlad(x[6], we, a3);
      a3 = __smlad(x[7], wo, a3);
    }
  }
  a[0] = a0;
  a[1] = a1;
  if (G == 4) {
    a[G - 2] = a2;
    a[G - 1] = a3;
  }
}

#undef TMCU_DSP_W
#undef TMCU_DSP_X
#undef TMCU_DSP_X0
#undef TMCU_DSP_CHUNK4
#undef TMCU_DSP_CHUNK2
#undef TMCU_DSP_LOOP

template <int G>
[[gnu::noinline]] void run(const Conv& cv, int8_t* buf, int8_t* linear) {
  const int32_t K = cv.K, out_c = cv.out_shape.c;
  const int32_t full = K >> 2;
  const bool has_tail = (K & 3) != 0;
  const int32_t chunks = full + (has_tail ? 1 : 0);
  const int32_t stride = 2 * G;  // words
  const QuantConvParams& p = *cv.p;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const int32_t off2 = static_cast<int32_t>((static_cast<uint32_t>(p.input_offset) & 0xFFFFu) * 0x00010001u);
  const bool whole_int8 = p.act_min == -128 && p.act_max == 127;
  const int32_t pixels = cv.out_shape.n * cv.out_shape.h * cv.out_shape.w;
  int32_t* const xq = reinterpret_cast<int32_t*>(buf);
  // The slots of absent pixels (their outputs are not stored) are zeroed,
  // never indeterminate; the linear patch's bytes beyond K hold the pad
  // (0 once expanded).
  std::memset(buf, 0, static_cast<size_t>(chunks * stride * 4));
  const LinearPatch lin{linear};
  lin.fill(K, cv.pad, chunks * 4 - K);
  // Without a tail, a 1x1 patch is expanded straight from the input.
  const bool in_place = cv.direct && !has_tail;
  PixelWalk at{cv.out_shape, p.stride_h, p.stride_w, p.pad_top, p.pad_left};
  const Shape4 s = cv.in_shape;
  for (int32_t q = 0; q < pixels; q += G) {
    const int32_t np = pixels - q < G ? pixels - q : G;
    for (int32_t i = 0; i < np; ++i, at.next()) {
      const int8_t* src = linear;
      if (in_place) {
        src = cv.in + ((at.n * s.h + at.oy * p.stride_h) * s.w + at.ox * p.stride_w) * s.c;
      } else {
        gather_pixel(cv, at, lin);
      }
      expand(xq + 2 * i, stride, src, chunks, off2);
    }
    int8_t* o = cv.out + q * out_c;
    const int8_t* w = cv.w;
    if (np < G) {  // the last pixels: requantize()
      for (int32_t oc = 0; oc < out_c; ++oc, w += K, ++o) {
        int32_t a[G];
        dots<G>(xq, w, full, has_tail, has_tail ? tail_word(w, K) : 0, a);
        const int32_t b = cv.bias ? cv.bias[oc] : 0;
        for (int32_t i = 0; i < np; ++i) o[i * out_c] = finish(wrap_add(a[i], b), cv.multiplier[oc], cv.shift[oc], quant);
      }
      continue;
    }
    for (int32_t oc = 0; oc < out_c; ++oc, w += K, ++o) {
      int32_t a[G];
      dots<G>(xq, w, full, has_tail, has_tail ? tail_word(w, K) : 0, a);
      const int32_t b = cv.bias ? cv.bias[oc] : 0;
      const int32_t m = cv.multiplier[oc], sh = cv.shift[oc];
      if (sh > 0) {
        for (int32_t i = 0; i < np; ++i) o[i * out_c] = finish(wrap_add(a[i], b), m, sh, quant);
      } else if (whole_int8) {
        // The clamp is int8's own range: the offset added saturating
        // (QADD), then SSAT to 8 bits, is quant().
        const int32_t e = -sh;
        int8_t* oi = o;
#pragma GCC unroll 4
        for (int i = 0; i < G; ++i, oi += out_c) {
          *oi = static_cast<int8_t>(__ssat(__qadd(requant_right(wrap_add(a[i], b), m, sh, e, e - 1), quant.offset), 8));
        }
      } else {
        const int32_t e = -sh;
        int8_t* oi = o;
#pragma GCC unroll 4
        for (int i = 0; i < G; ++i, oi += out_c) *oi = quant(requant_right(wrap_add(a[i], b), m, sh, e, e - 1));
      }
    }
  }
}

// Output channels per block of run_wide: their 4 pixels' accumulators at
// the end of buf.
constexpr int32_t kWideOc = 32;
// run_wide's K chunks: 4 expanded patches of up to kWideChunk taps fill the
// rest of buf (no stack beyond run()'s).
constexpr int32_t kWideChunk = (kPatchBuffer - 4 * kWideOc * 4) / 8;

// Bytes of run<4>'s (patches of r <= 288 taps, r a multiple of 4) or
// run<2>'s (r <= kMaxPatch) expanded patches: 2 bytes a tap.
constexpr int32_t dsp_buf_bytes(int32_t r) { return r * 8 <= kPatchBuffer ? r * 8 : r * 4; }

// conv2d_s8 for patches of any K (run() takes K <= kMaxPatch): per block of
// kWideOc output channels and group of 4 pixels, the accumulators start at
// the biases and take the patches' K chunks (of at most kWideChunk taps,
// multiples of 4 but the last) one after the other, each chunk gathered into
// linear, expanded into buf as run()'s patches and multiplied by the rows'
// same chunk (dots, its tail word from the chunk); then requantize(). The
// patches are gathered again for each block: K bytes per pixel against
// kWideOc * K MACs.
[[gnu::noinline]] void run_wide(const Conv& cv, int8_t* buf, int8_t* linear) {
  const int32_t K = cv.K, out_c = cv.out_shape.c;
  const int32_t n_chunks = (K + kWideChunk - 1) / kWideChunk;
  const int32_t kc = ((K + n_chunks - 1) / n_chunks + 3) & ~3;  // <= kWideChunk, a multiple of 4
  const QuantConvParams& p = *cv.p;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const int32_t off2 = static_cast<int32_t>((static_cast<uint32_t>(p.input_offset) & 0xFFFFu) * 0x00010001u);
  const int32_t pixels = cv.out_shape.n * cv.out_shape.h * cv.out_shape.w;
  int32_t* const xq = reinterpret_cast<int32_t*>(buf);
  // The slots of absent pixels (their outputs are not stored) zeroed, never
  // indeterminate.
  std::memset(buf, 0, static_cast<size_t>(kc * 8));
  const LinearPatch lin{linear};
  int32_t* const acc = xq + 2 * kWideChunk;  // after the 4 slots (8 bytes a tap)
  for (int32_t oc0 = 0; oc0 < out_c; oc0 += kWideOc) {
    const int32_t ocn = out_c - oc0 < kWideOc ? out_c - oc0 : kWideOc;
    PixelWalk at{cv.out_shape, p.stride_h, p.stride_w, p.pad_top, p.pad_left};
    for (int32_t q = 0; q < pixels; q += 4) {
      const int32_t np = pixels - q < 4 ? pixels - q : 4;
      for (int32_t j = 0; j < ocn; ++j) {
        const int32_t b = cv.bias ? cv.bias[oc0 + j] : 0;
        acc[4 * j] = acc[4 * j + 1] = acc[4 * j + 2] = acc[4 * j + 3] = b;
      }
      const PixelWalk group = at;
      for (int32_t k0 = 0; k0 < K; k0 += kc) {
        const int32_t kn = K - k0 < kc ? K - k0 : kc;
        const int32_t full = kn >> 2;
        const bool has_tail = (kn & 3) != 0;
        const int32_t chunks = full + (has_tail ? 1 : 0);
        // The bytes beyond the chunk hold the pad (0 once expanded).
        lin.fill(kn, cv.pad, chunks * 4 - kn);
        at = group;
        for (int32_t i = 0; i < np; ++i, at.next()) {
          const KWindow<LinearPatch> win{lin, k0, k0 + kn};
          gather_pixel(cv, at, win);
          expand(xq + 2 * i, 8, linear, chunks, off2);
        }
        const int8_t* w = cv.w + oc0 * K + k0;
        for (int32_t j = 0; j < ocn; ++j, w += K) {
          int32_t(&a)[4] = *reinterpret_cast<int32_t(*)[4]>(acc + 4 * j);
          dots<4, true>(xq, w, full, has_tail, has_tail ? tail_word(w, kn) : 0, a);
        }
      }
      int8_t* const o = cv.out + q * out_c + oc0;
      for (int32_t j = 0; j < ocn; ++j) {
        const int32_t m = cv.multiplier[oc0 + j], sh = cv.shift[oc0 + j];
        for (int32_t i = 0; i < np; ++i) o[i * out_c + j] = finish(acc[4 * j + i], m, sh, quant);
      }
    }
  }
}

}  // namespace
}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_DSP_H_
