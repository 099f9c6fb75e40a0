/* Public C declarations shared by applications and generated model files. */
#ifndef TORCHMCU_TORCHMCU_H_
#define TORCHMCU_TORCHMCU_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One planned memory region handed to the runtime: at least the planned
   size, 16-byte aligned, owned by the application. */
typedef struct {
  uint8_t* data;
  size_t size;
} tmcu_arena;

/* Runs `program` over the samples of an io blob (see firmware/app/app.h) and
   reports in the line protocol over tmcu_platform_write. Returns 0 or the
   runtime's error code. */
int tmcu_app_run(const uint8_t* program, size_t program_size, const tmcu_arena* arenas,
                 size_t num_arenas, const uint8_t* io, size_t io_size);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_TORCHMCU_H_ */
