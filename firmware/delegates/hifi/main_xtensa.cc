// Firmware entry for an Xtensa core under Cadence's ISS (xt-run): the compiled
// model (model_pte.h, model_arenas.h) run over the io blob, which the runner
// passes as the program's first argument (torchmcu.sim.xtrun). With the core's
// "sim" linker support package the C library's open/read/write reach host
// files and the console through simulator calls. The blob is read into a
// static buffer the size of the board's io window with open/read, not stdio,
// whose buffers would come from the heap (malloc is wrapped to a link error).
#include <fcntl.h>
#include <unistd.h>

#include "boards/platform.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

#ifndef TMCU_MODEL_SYMBOL
#define TMCU_MODEL_SYMBOL model
#endif
#define TMCU_PASTE3_(a, b, c) a##b##c
#define TMCU_PASTE3(a, b, c) TMCU_PASTE3_(a, b, c)
#define TMCU_NAME(prefix, suffix) TMCU_PASTE3(prefix, TMCU_MODEL_SYMBOL, suffix)

extern "C" void tmcu_xtensa_set_io(const uint8_t* base, size_t size);

namespace {
alignas(16) uint8_t io_blob[TMCU_BOARD_IO_SIZE];
}  // namespace

int main(int argc, char** argv) {
  tmcu_platform_init();
  size_t n = 0;
  if (argc > 1) {
    const int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 2;
    while (n < sizeof(io_blob)) {
      const ssize_t got = read(fd, io_blob + n, sizeof(io_blob) - n);
      if (got <= 0) break;
      n += size_t(got);
    }
    close(fd);
  }
  tmcu_xtensa_set_io(io_blob, n);
  return tmcu_app_run(TMCU_NAME(tmcu_, _pte), TMCU_NAME(tmcu_, _pte_size), TMCU_NAME(tmcu_, _arenas),
                      sizeof(TMCU_NAME(tmcu_, _arenas)) / sizeof(tmcu_arena), tmcu_platform_io_base(),
                      tmcu_platform_io_size());
}
