/* torchmcu example: one digit classified by a compiled PyTorch MLP.

   The program (model/model_pte.c, in flash) runs over the io blob in
   model/digit_io.h with the planned arenas (model/model_arenas.c);
   tmcu_app_run() prints each sample's outputs in the line protocol and
   returns 0 or the runtime's error code, which becomes the exit status. */
#include "boards/platform.h"
#include "digit_io.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

static void write_str(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  tmcu_platform_write(s, n);
}

int main(void) {
  static const char kLabel[] = {'0' + TMCU_DIGIT_LABEL, '\n', '\0'};
  tmcu_platform_init();
  write_str("digits example: the digit is a ");
  write_str(kLabel);
  return tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas, TMCU_MODEL_NUM_ARENAS,
                      tmcu_digit_io, sizeof(tmcu_digit_io));
}
