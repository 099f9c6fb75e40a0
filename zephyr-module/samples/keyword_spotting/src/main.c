/* Keyword spotting with torchmcu on Zephyr: the DS-CNN compiled by the
 * module's model hook, called through its C API (model.h: tmcu_model_init,
 * tmcu_model_input, tmcu_model_invoke, tmcu_model_output), over each sample
 * of the input compiled into the image. It prints the lines torchmcu's
 * runner parses ("tmcu: load/sample/done ..."), as the bare-metal firmware
 * does, so the test and twister check the output bit for bit.
 *
 * With CONFIG_TORCHMCU_PROFILING the line-protocol app of firmware/app runs
 * instead: it profiles the first sample op by op.
 *
 * The model runs on a thread of its own whose stack is sized from the
 * build's figure: model_stack.h (written by `torchmcu build`, which the
 * module's hook runs) gives TMCU_MODEL_STACK_BYTES, the computed worst case
 * of tmcu_model_init/invoke/reset with the deepest exception frame, and
 * TMCU_MODEL_FIRMWARE_STACK_BYTES, the bare-metal firmware's whole worst
 * case (the line-protocol app included). APP_STACK_BYTES is this file's
 * own need above them: run_samples' frame and printk's (Zephyr's cbprintf
 * formatting a number), with room to spare; CONFIG_HW_STACK_PROTECTION
 * makes an overflow fault instead of corrupting memory. */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include "boards/platform.h"
#include "model.h"
#include "model_stack.h"
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

/* This file's own frames above the model's calls (see the top). */
#define APP_STACK_BYTES 1024
#ifdef CONFIG_TORCHMCU_PROFILING
#define MODEL_THREAD_STACK_BYTES (TMCU_MODEL_FIRMWARE_STACK_BYTES + APP_STACK_BYTES)
#else
#define MODEL_THREAD_STACK_BYTES (TMCU_MODEL_STACK_BYTES + APP_STACK_BYTES)
#endif

K_THREAD_STACK_DEFINE(model_stack, MODEL_THREAD_STACK_BYTES);
static struct k_thread model_thread;
static int model_status;

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

static void model_main(void *a, void *b, void *c)
{
	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
#ifdef CONFIG_TORCHMCU_PROFILING
	model_status = tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas,
				    TMCU_MODEL_NUM_ARENAS, tmcu_platform_io_base(),
				    tmcu_platform_io_size());
#else
	model_status = run_samples();
#endif
}

int main(void)
{
	printk("torchmcu keyword spotting: Zephyr %s, board %s\n", KERNEL_VERSION_STRING,
	       CONFIG_BOARD);
	printk("torchmcu: model thread stack %u B = model %u B (computed) + app %u B\n",
	       (unsigned int)MODEL_THREAD_STACK_BYTES,
	       (unsigned int)(MODEL_THREAD_STACK_BYTES - APP_STACK_BYTES),
	       (unsigned int)APP_STACK_BYTES);
	tmcu_platform_init();
	k_thread_create(&model_thread, model_stack, K_THREAD_STACK_SIZEOF(model_stack), model_main,
			NULL, NULL, NULL, K_PRIO_PREEMPT(0), 0, K_NO_WAIT);
	k_thread_join(&model_thread, K_FOREVER);
#ifdef CONFIG_INIT_STACKS
	/* What the model thread used, measured (Zephyr painted its stack). */
	size_t unused = 0;

	if (k_thread_stack_space_get(&model_thread, &unused) == 0) {
		printk("torchmcu: model thread stack used %u of %u B (measured)\n",
		       (unsigned int)(K_THREAD_STACK_SIZEOF(model_stack) - unused),
		       (unsigned int)K_THREAD_STACK_SIZEOF(model_stack));
	}
#endif
	/* Ends a QEMU run with the status (CONFIG_TORCHMCU_SEMIHOSTING_EXIT);
	 * elsewhere it parks this thread. */
	tmcu_platform_exit(model_status);
	return 0;
}
