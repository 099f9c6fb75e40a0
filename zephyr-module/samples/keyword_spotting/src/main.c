/* Keyword spotting with torchmcu on Zephyr: the DS-CNN compiled by the
 * module's model hook runs over the input compiled into the image, and the
 * line-protocol app of firmware/app prints the result ("tmcu: ..." lines that
 * torchmcu.sim.runner parses, the same as on torchmcu's bare-metal boards). */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include "boards/platform.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

#if __has_include(<zephyr/version.h>)
#include <zephyr/version.h>
#else
#include <version.h>
#endif

int main(void)
{
	printk("torchmcu keyword spotting: Zephyr %s, board %s\n", KERNEL_VERSION_STRING,
	       CONFIG_BOARD);
	tmcu_platform_init();
	int status = tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas,
				  TMCU_MODEL_NUM_ARENAS, tmcu_platform_io_base(),
				  tmcu_platform_io_size());
	/* Ends a QEMU run with the status (CONFIG_TORCHMCU_SEMIHOSTING_EXIT);
	 * elsewhere it parks this thread. */
	tmcu_platform_exit(status);
}
