/* Your own main.c: a model torchmcu compiled, called through its C API.

     torchmcu compile examples/digits.py:make --board mps2-an505 -o build/digits [--quant int8 --io int8]
     torchmcu build build/digits --app examples/c_api/main.c
     torchmcu run build/digits          # prints what main prints; exits with main's return value

   model.h (written by `torchmcu compile`, --symbol model) declares
   tmcu_model_init/input/invoke/output and describes each input and output:
   TMCU_MODEL_INPUT0_ELEMENTS, _TYPE (float or int8_t), _DTYPE, _SCALE,
   _ZERO_POINT, ... This file uses them, so it works whether the model takes
   float32 or int8 (--io int8). It classifies one hand-drawn 8x8 digit and
   returns the class (0-9), or 128 + the error code when a call fails. */
#include <stdint.h>

#include "boards/platform.h" /* tmcu_platform_write: the board's UART (QEMU's stdout) */
#include "model.h"

/* A hand-drawn 7, pixels 0..16 (the digits model takes pixel / 16). */
static const uint8_t kDigit[64] = {
    0, 4,  14, 16, 16, 16, 6, 0,  /* */
    0, 3,  9,  8,  10, 16, 5, 0,  /* */
    0, 0,  0,  0,  12, 12, 0, 0,  /* */
    0, 0,  0,  4,  16, 4,  0, 0,  /* */
    0, 0,  1,  14, 14, 0,  0, 0,  /* */
    0, 0,  6,  16, 5,  0,  0, 0,  /* */
    0, 0,  11, 13, 0,  0,  0, 0,  /* */
    0, 0,  13, 8,  0,  0,  0, 0,
};

static void print(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  tmcu_platform_write(s, n);
}

static void print_int(long v) {
  char buf[12];
  int i = sizeof buf;
  unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
  do {
    buf[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0 && i > 1);
  if (v < 0) buf[--i] = '-';
  tmcu_platform_write(buf + i, sizeof buf - i);
}

static int fail(const char* what, int err) {
  print(what);
  print(" failed: ");
  print(tmcu_error_name(err));
  print("\n");
  return 128 + err;
}

int main(void) {
  int err = tmcu_model_init();
  if (err != TMCU_OK) return fail("tmcu_model_init", err);

  /* The input, in the dtype the model takes: int8 inputs are quantized with
     the input's scale and zero point (rounding half away from zero, as the
     runtime's QUANTIZE does). */
  TMCU_MODEL_INPUT0_TYPE* in = (TMCU_MODEL_INPUT0_TYPE*)tmcu_model_input(0);
  for (int i = 0; i < TMCU_MODEL_INPUT0_ELEMENTS; ++i) {
    const float x = (float)kDigit[i] / 16.0f;
#if TMCU_MODEL_INPUT0_DTYPE == TMCU_DTYPE_INT8
    const float scaled = x / TMCU_MODEL_INPUT0_SCALE;
    long q = (long)(scaled + (scaled >= 0.0f ? 0.5f : -0.5f)) + TMCU_MODEL_INPUT0_ZERO_POINT;
    in[i] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
#else
    in[i] = x;
#endif
  }

  err = tmcu_model_invoke();
  if (err != TMCU_OK) return fail("tmcu_model_invoke", err);

  /* The scores: the largest is the class. Printed in thousandths (no printf
     here: the firmware links no stdio). */
  const TMCU_MODEL_OUTPUT0_TYPE* out = (const TMCU_MODEL_OUTPUT0_TYPE*)tmcu_model_output(0);
  int best = 0;
  print("scores (x1000):");
  for (int k = 0; k < TMCU_MODEL_OUTPUT0_ELEMENTS; ++k) {
#if TMCU_MODEL_OUTPUT0_DTYPE == TMCU_DTYPE_INT8
    const float score = TMCU_MODEL_OUTPUT0_SCALE * (float)(out[k] - TMCU_MODEL_OUTPUT0_ZERO_POINT);
#else
    const float score = out[k];
#endif
    print(" ");
    print_int((long)(score * 1000.0f));
    if (out[k] > out[best]) best = k;
  }
  print("\nclass ");
  print_int(best);
  print("\n");
  return best;
}
