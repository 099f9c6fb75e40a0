/* Keyword spotting with torchmcu on Zephyr: the DS-CNN compiled by the
 * module's model hook, called through its C API (model.h: tmcu_model_init,
 * tmcu_model_input, tmcu_model_invoke, tmcu_model_output), over each sample
 * of the input compiled into the image. It prints the lines torchmcu's
 * runner parses ("tmcu: load/sample/done ..."), as the bare-metal firmware
 * does, so the test and twister check the output bit for bit.
 *
 * With CONFIG_TORCHMCU_PROFILING the line-protocol app of firmware/app runs
 * instead: it profiles the first sample op by op. */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include "boards/platform.h"
#include "model.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

#if __has_include(<zephyr/version.h>)
#include <zephyr/version.h>
#else
#include <version.h>
#endif

/* The io blob the build compiled in (firmware/app/app.h): a 32-byte header,
 * then the samples, each the inputs' bytes back to back. */
#define IO_HEADER_BYTES 32u

static uint32_t read_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int finish(int status, uint32_t samples)
{
	printk("tmcu: done status=%d samples=%u\n", status, (unsigned int)samples);
	return status;
}

static int run_samples(void)
{
	uint64_t t0 = tmcu_platform_ticks();
	int err = tmcu_model_init();

	printk("tmcu: load status=%d ticks=%u runs=1\n", err,
	       (unsigned int)(tmcu_platform_ticks() - t0));
	if (err != TMCU_OK) {
		printk("tmcu_model_init failed: %s\n", tmcu_error_name(err));
		return finish(err, 0);
	}
	const uint8_t *io = tmcu_platform_io_base();
	const uint32_t samples = read_u32(io + 8);

	/* The sample's model: one input, one output (the keyword scores). */
	if (read_u32(io + 12) != TMCU_MODEL_INPUT0_BYTES || TMCU_MODEL_NUM_INPUTS != 1 ||
	    TMCU_MODEL_NUM_OUTPUTS != 1) {
		return finish(0x50, 0); /* the app's "bad io" */
	}
	for (uint32_t s = 0; s < samples; ++s) {
		const uint8_t *src = io + IO_HEADER_BYTES + s * TMCU_MODEL_INPUT0_BYTES;
		uint8_t *in = tmcu_model_input(0);

		for (uint32_t b = 0; b < TMCU_MODEL_INPUT0_BYTES; ++b) {
			in[b] = src[b];
		}
		t0 = tmcu_platform_ticks();
		err = tmcu_model_invoke();
		const uint64_t ticks = tmcu_platform_ticks() - t0;

		if (err != TMCU_OK) {
			printk("tmcu_model_invoke failed: %s\n", tmcu_error_name(err));
			return finish(err, s);
		}
		const uint8_t *out = tmcu_model_output(0);

		printk("tmcu: sample %u ticks=%u out0=", (unsigned int)s, (unsigned int)ticks);
		for (uint32_t b = 0; b < TMCU_MODEL_OUTPUT0_BYTES; ++b) {
			printk("%02x", out[b]);
		}
		printk("\n");
	}
	return finish(0, samples);
}

int main(void)
{
	printk("torchmcu keyword spotting: Zephyr %s, board %s\n", KERNEL_VERSION_STRING,
	       CONFIG_BOARD);
	tmcu_platform_init();
#ifdef CONFIG_TORCHMCU_PROFILING
	int status = tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas,
				  TMCU_MODEL_NUM_ARENAS, tmcu_platform_io_base(),
				  tmcu_platform_io_size());
#else
	int status = run_samples();
#endif
	/* Ends a QEMU run with the status (CONFIG_TORCHMCU_SEMIHOSTING_EXIT);
	 * elsewhere it parks this thread. */
	tmcu_platform_exit(status);
}
