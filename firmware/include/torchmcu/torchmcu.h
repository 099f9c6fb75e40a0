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

/* What a delegate measured on its hardware during its last call (the
   Ethos-U delegate: the NPU's PMU), e.g. for a profile. */
#define TMCU_DELEGATE_MAX_COUNTERS 4
typedef struct {
  uint32_t partition;    /* the call's partition number (report.json "ethos_u") */
  uint32_t num_counters; /* entries of counters and names in use */
  uint64_t cycles;       /* the accelerator's clock cycles over the call */
  uint32_t counters[TMCU_DELEGATE_MAX_COUNTERS];
  const char* names[TMCU_DELEGATE_MAX_COUNTERS]; /* e.g. "sram_rd_beats"; static strings */
} tmcu_delegate_sample;

/* The figures of the last delegate call, once: nonzero and *out filled when
   a call ended since the previous take, 0 otherwise. Defined by a delegate
   that measures; weak, so its address is null in firmware without one. */
int tmcu_delegate_take_sample(tmcu_delegate_sample* out) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_TORCHMCU_H_ */
