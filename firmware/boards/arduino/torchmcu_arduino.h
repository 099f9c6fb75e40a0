/* The Arduino side of a library written by `torchmcu export --arduino`.
 *
 * platform_arduino.cpp implements boards/platform.h over the Arduino core
 * (Serial for the log, micros() for ticks); serial_io.cpp answers
 * `torchmcu run --device PORT`: it reads an io blob (the layout of
 * app/app.h) from Serial and runs the model over it with tmcu_app_run, so the
 * board prints the same line protocol as the firmware does in QEMU.
 *
 * Serial belongs to the sketch: call Serial.begin() before anything here. */
#ifndef TORCHMCU_BOARDS_ARDUINO_TORCHMCU_ARDUINO_H_
#define TORCHMCU_BOARDS_ARDUINO_TORCHMCU_ARDUINO_H_

#include <stddef.h>
#include <stdint.h>

#include "torchmcu/torchmcu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tmcu_arduino_serve() found no request waiting on Serial. */
#define TMCU_ARDUINO_NO_REQUEST (-1)
/* The buffer passed to tmcu_arduino_serve() cannot even hold an io header. */
#define TMCU_ARDUINO_BUFFER_TOO_SMALL (-2)

/* Bytes of the io blob header (app/app.h: kIoHeaderBytes). A buffer for n
 * samples needs TMCU_IO_HEADER_BYTES + n * (the inputs' bytes). */
#define TMCU_IO_HEADER_BYTES 32u

/* Prints "tmcu: ready", the line `torchmcu run --device` waits for before it
 * sends a request. */
void tmcu_arduino_ready(void);

/* Serves one request of `torchmcu run --device` if one is arriving on Serial;
 * returns at once with TMCU_ARDUINO_NO_REQUEST otherwise.
 *
 * A request is an io blob: bytes before its "TMIO" magic are skipped, then the
 * header and the samples it announces are read into `buffer` (capacity bytes,
 * owned by the caller), waiting at most the Serial timeout (Stream::setTimeout,
 * 1 s by default) for each chunk. The model then runs over it with
 * tmcu_app_run, which prints the load, op, sample and done lines; a blob that
 * does not fit `buffer` or arrives incomplete is still answered, with
 * "done status=80" (bad io), after its remaining bytes are drained. Ends with
 * tmcu_arduino_ready().
 *
 * Returns tmcu_app_run's status (0: every sample ran), or one of the
 * TMCU_ARDUINO_* codes above. */
int tmcu_arduino_serve(const uint8_t* program, size_t program_size, const tmcu_arena* arenas,
                       size_t num_arenas, uint8_t* buffer, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_BOARDS_ARDUINO_TORCHMCU_ARDUINO_H_ */
