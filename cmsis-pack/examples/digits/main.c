/* torchmcu example: one digit classified by a compiled PyTorch MLP.

   The program (model/model_pte.c, in flash) runs over the io blob in
   model/digit_io.h with the planned arenas (model/model_arenas.c);
   tmcu_app_run() prints each sample's outputs in the line protocol and
   returns 0 or the runtime's error code, which becomes the exit status.

   The stack: model/model_stack.h (written by `torchmcu build` when the pack
   was made) gives TMCU_MODEL_FIRMWARE_STACK_BYTES, the computed worst case of
   this very program (main, tmcu_app_run, the kernels and the deepest
   exception); main checks the stack the linker script gives
   (__tmcu_stack_size, the platform's ld/<board>.ld: the board's stack_size)
   against it and refuses to run on less. */
#include "boards/platform.h"
#include "digit_io.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"
#if __has_include("model_stack.h")
#include "model_stack.h"
#endif

/* The stack the platform's linker script reserves (its bounds). */
extern uint32_t __tmcu_stack_bottom[];
extern uint32_t __tmcu_stack_top[];

static void write_str(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  tmcu_platform_write(s, n);
}

static void write_uint(uint32_t v) {
  char buf[11];
  int i = sizeof buf;
  do {
    buf[--i] = (char)('0' + v % 10u);
    v /= 10u;
  } while (v != 0u && i > 0);
  tmcu_platform_write(buf + i, sizeof buf - (size_t)i);
}

int main(void) {
  static const char kLabel[] = {'0' + TMCU_DIGIT_LABEL, '\n', '\0'};
  tmcu_platform_init();
  write_str("digits example: the digit is a ");
  write_str(kLabel);
#ifdef TMCU_MODEL_FIRMWARE_STACK_BYTES
  const uint32_t linked = (uint32_t)((const char*)__tmcu_stack_top - (const char*)__tmcu_stack_bottom);
  write_str("stack: ");
  write_uint(linked);
  write_str(" B linked, ");
  write_uint(TMCU_MODEL_FIRMWARE_STACK_BYTES);
  write_str(" B needed (computed by torchmcu build)\n");
  if (linked < TMCU_MODEL_FIRMWARE_STACK_BYTES) {
    write_str("the stack is smaller than the computed need: raise __tmcu_stack_size\n");
    return 0x51;
  }
#endif
  return tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas, TMCU_MODEL_NUM_ARENAS,
                      tmcu_digit_io, sizeof(tmcu_digit_io));
}
