// Internal to the int8 portable kernels: fast paths for targets with the
// Armv7E-M/Armv8-M DSP extension (Cortex-M4, M7, M33, M55: ACLE
// __ARM_FEATURE_DSP, SMLAD on pairs of sign-extended int8s) or with MVE
// (Cortex-M55, M85: __ARM_FEATURE_MVE, 16 int8 lanes per instruction). They
// are the project's own code, selected when the firmware is compiled; the
// generic C kernels (conv2d_s8.cc, pool2d_s8.cc) remain the path of every
// other target (Cortex-M0/M3, the host) and the tests' oracle, and the fast
// paths produce the same int8 outputs bit for bit (tests/test_kernels_s8_fast.py
// runs them on QEMU's M4, M33 and M55 against reference/).
//
// Each function returns true when it computed the op, false when the
// arguments are outside what it handles (the caller then runs the generic
// kernel). Arguments as the kernels of the same name in portable_s8.h.
#ifndef TORCHMCU_KERNELS_PORTABLE_FAST_S8_H_
#define TORCHMCU_KERNELS_PORTABLE_FAST_S8_H_

#include "portable_s8.h"

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

// conv2d_s8_fast.h: fast::conv2d_s8 (one group, a patch of at most kMaxPatch
// bytes, or a 1x1 kernel without padding: a GEMM of 4 output channels by 2
// output pixels per inner loop) and fast::depthwise_conv2d_s8 (depth
// multiplier 1: channels across the MVE lanes, or 4 per SMLABB/SMLATT step).

#endif  // TORCHMCU_KERNELS_PORTABLE_FAST_S8_H_
