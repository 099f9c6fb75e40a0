// The fast tier: the int8 kernels' fast paths for targets with the
// Armv7E-M/Armv8-M DSP extension (Cortex-M4, M7, M33, M55: ACLE
// __ARM_FEATURE_DSP, SMLAD on pairs of sign-extended int8s) or with MVE
// (Cortex-M55, M85: __ARM_FEATURE_MVE, 16 int8 lanes per instruction), one
// folder per kernel family as kernels/portable/. They are the project's own
// code, selected when the firmware is compiled (below; -DTMCU_S8_GENERIC
// turns them off); the generic C kernels of kernels/portable/ (e.g.
// conv/conv2d_s8.cc, elementwise/binary_s8.cc) call them first and remain the
// path of every other target (Cortex-M0/M3, the host) and the tests' oracle,
// and the fast paths produce the same int8 outputs bit for bit
// (tests/test_kernels_s8_fast*.py runs them on QEMU's M4, M33 and M55
// against reference/).
//
// Each function returns true when it computed the op, false when the
// arguments are outside what it handles (the caller then runs the generic
// kernel). Arguments as the generic kernels of the same name
// (kernels/portable/<family>/<family>.h).
#ifndef TORCHMCU_KERNELS_FAST_FAST_H_
#define TORCHMCU_KERNELS_FAST_FAST_H_

#include "kernels/portable/common/types.h"

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && !defined(TMCU_S8_GENERIC)
#define TMCU_S8_MVE 1
#else
#define TMCU_S8_MVE 0
#endif
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(TMCU_S8_GENERIC)
#define TMCU_S8_DSP 1
#else
#define TMCU_S8_DSP 0
#endif
#define TMCU_S8_FAST (TMCU_S8_MVE || TMCU_S8_DSP)

// Which fast paths an image links, for one program: the builder passes
// -DTMCU_FAST_<PATH>=0 for the paths no op of the program can take
// (builder/fast_paths.py reads the same conditions from the program's shapes),
// and with `build --opt size` also for those whose bytes buy too few
// instructions, and -DTMCU_FAST_OS=1 (the fast paths at the image's -Os, not
// -O2). A path left out returns false: the generic kernel runs, same bits.
// Without the flags (the library build, the tests' own builds) all are in.
#ifndef TMCU_FAST_CONV_WIDE  // conv2d_s8: patches over kMaxPatch bytes (run_wide)
#define TMCU_FAST_CONV_WIDE 1
#endif
#ifndef TMCU_FAST_CONV_G4  // conv2d_s8 on DSP: patches of 4 pixels (K <= 288)
#define TMCU_FAST_CONV_G4 1
#endif
#ifndef TMCU_FAST_CONV_G2  // conv2d_s8 on DSP: patches of 2 pixels (288 < K <= kMaxPatch)
#define TMCU_FAST_CONV_G2 1
#endif
#ifndef TMCU_FAST_DW_S1  // depthwise row path, stride_w 1
#define TMCU_FAST_DW_S1 1
#endif
#ifndef TMCU_FAST_DW_S2  // depthwise row path, stride_w 2
#define TMCU_FAST_DW_S2 1
#endif
#ifndef TMCU_FAST_FC_PER_CHANNEL  // linear_s8 on MVE: one multiplier per output
#define TMCU_FAST_FC_PER_CHANNEL 1
#endif
#ifndef TMCU_FAST_FC_PER_TENSOR  // linear_s8 on MVE: one multiplier
#define TMCU_FAST_FC_PER_TENSOR 1
#endif
#ifndef TMCU_FAST_FC_FEW  // linear_s8 on DSP: 1 or 2 outputs
#define TMCU_FAST_FC_FEW 1
#endif
#ifndef TMCU_FAST_FC_CHUNKED  // linear_s8 on DSP: over kFcChunk inputs (and 3 outputs or more)
#define TMCU_FAST_FC_CHUNKED 1
#endif
#ifndef TMCU_FAST_ADD_LANES  // add_s8 on MVE, 4 lanes (portable/elementwise/binary_s8.cc): what the table's misses
#define TMCU_FAST_ADD_LANES 1
#endif
#ifndef TMCU_FAST_CONV  // conv2d_s8, every shape
#define TMCU_FAST_CONV 1
#endif
#ifndef TMCU_FAST_DW  // depthwise_conv2d_s8, every shape
#define TMCU_FAST_DW 1
#endif
#ifndef TMCU_FAST_LINEAR  // linear_s8
#define TMCU_FAST_LINEAR 1
#endif
#ifndef TMCU_FAST_ADD  // add_s8 of equal shapes
#define TMCU_FAST_ADD 1
#endif
#ifndef TMCU_FAST_POOL  // avg_pool2d_s8 and max_pool2d_s8
#define TMCU_FAST_POOL 1
#endif
#ifndef TMCU_FAST_SOFTMAX  // softmax_rows_s8 (SOFTMAX_S8, SOFTMAX_MASKED_S8)
#define TMCU_FAST_SOFTMAX 1
#endif
#ifndef TMCU_FAST_OS  // 1: the fast paths at the image's -O (size-first), not -O2
#define TMCU_FAST_OS 0
#endif

#if TMCU_S8_MVE
#include <arm_mve.h>

#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace fast {

// requantize() of 4 lanes. VQRDMULH gives floor((x * m + 2^30) / 2^31)
// exactly (it saturates only for m = INT32_MIN, and m >= 0). The division by
// 2^-s rounding half away from zero is VRSHL's rounding shift (ties up) of
// hi - 1 where hi < 0 and s < 0: with t that value, (t + 2^(e-1)) >> e =
// (t >> e) + bit e-1 of t, requantize()'s form. A positive shift is VQSHL's
// saturating left shift before the multiply: exact where x * 2^s fits int32;
// where it does not, requantize() gives at least m in magnitude and this at
// least m - 1, of the same sign, so with m >= 512 (requant_vector_ok) both
// clamp to the same int8 bound.
[[gnu::always_inline]] inline int32x4_t requant_v(int32x4_t acc, int32x4_t m, int32x4_t s) {
  const int32x4_t zero = vdupq_n_s32(0);
  const int32x4_t hi = vqrdmulhq_s32(vqshlq_s32(acc, vmaxq_s32(s, zero)), m);
  const mve_pred16_t down = vcmpltq_n_s32(hi, 0) & vcmpltq_n_s32(s, 0);
  return vrshlq_s32(vsubq_m_n_s32(hi, hi, 1, down), vminq_s32(s, zero));
}

[[gnu::always_inline]] inline int32x4_t clamp_v(int32x4_t v, const s8::OutQuant& q) {
  return vaddq_n_s32(vminq_s32(vmaxq_s32(v, vdupq_n_s32(q.lo)), vdupq_n_s32(q.hi)), q.offset);
}

// True when requant_v is requantize() and the clamp for every channel of
// [0, n): shifts <= 0, or multipliers 0 or >= 512 (the compiler's are 0 or
// in [2^30, 2^31)).
[[gnu::always_inline]] inline bool requant_vector_ok(const int32_t* multiplier, const int32_t* shift, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    if (shift[i] > 0 && multiplier[i] != 0 && multiplier[i] < 512) return false;
  }
  return true;
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu
#endif

// Where the fast paths are:
// - conv/conv2d_s8.h (+ _mve.h, _dsp.h): fast::conv2d_s8, patches of up to
//   576 bytes copied into a 4-pixel interleaved buffer; a GEMM of 2 output
//   channels x 4 pixels (MVE VMLADAVA) or 1 x 4/2 (DSP SMLAD). Longer
//   patches (any K) in K chunks (run_wide): blocks of 32 output channels
//   whose int32 accumulators take the chunks one after the other.
// - conv/dwconv_s8.h, dwconv_s8_rows.h: fast::depthwise_conv2d_s8, row
//   blocked (MVE: 4 output rows per vector over gathered column windows;
//   DSP: SMLAD on column buffers, SMMLAR requantization), else per pixel.
// - conv/linear_s8.h: fully connected (MVE: 4 weight rows per input load;
//   DSP: SMLAD over pre-expanded input pairs).
// - elementwise/binary_s8.h: ADD of equal shapes (the smaller-scale input
//   tabulated; MVE 16 elements per step).
// - pool_resize/pool2d_s8.h: average pooling (exact int16 sums per block of
//   at most 256 taps), max pooling (MVE VMAX, DSP SSUB8/SEL).
// - attention_norm/batch_matmul_s8.h: BATCH_MATMUL with b transposed, the
//   offsets folded into row and column sums (MVE: 4 columns per VMLADAVA
//   input load; DSP: linear_s8 per row).
// - attention_norm/layer_norm_s8.h: LAYER_NORM (and on MVE its int16
//   version), the row's root from a floating-point estimate made exact
//   (MVE: 4 outputs per step).
// - reduce/softmax_s8.h: SOFTMAX and SOFTMAX_MASKED with the exp table
//   (MVE: 4 table gathers per step).
// - recurrent/recurrent_s8.h: LSTM_S8 and GRU_S8, both weight schemes: a
//   step's gate rows in one pass (MVE: 4 rows per VMLADAVA pass, requantized
//   as one vector; DSP: SMLAD on the step's inputs expanded once), their
//   int16 pre-activations on the stack, then the elementwise part (MVE: 4
//   units per vector, sigmoid/tanh by table gathers). MVE also runs the
//   a16w8 LSTM_S16 and GRU_S16 (64-bit VMLALDAVA products, requantize_s64
//   per row, the same elementwise part). The generic recurrent kernels'
//   int8 products take its SMLAD dots on DSP builds; RNN_S8/S16 and a16w8
//   on DSP run the generic kernels.

#endif  // TORCHMCU_KERNELS_FAST_FAST_H_
