/* torchmcu's Zephyr log module (CONFIG_TORCHMCU_LOG). The platform layer
 * calls these from C++; the logging macros stay in C, where every Zephyr
 * release packages their arguments correctly (Zephyr 3.1's C++ expansion of
 * them logged a wrong string). */
#include <zephyr/logging/log.h>
#include <zephyr/logging/log_ctrl.h>

LOG_MODULE_REGISTER(torchmcu, CONFIG_TORCHMCU_LOG_LEVEL);

void tmcu_zephyr_log_exit(int status, const char *name)
{
	if (status == 0) {
		LOG_INF("exit status 0");
	} else {
		LOG_ERR("exit status %d (%s)", status, name);
	}
	LOG_PANIC(); /* flush deferred messages before a simulator stops */
}

void tmcu_zephyr_log_fatal(unsigned int reason)
{
	LOG_ERR("fatal error, reason %u", reason);
	LOG_PANIC();
}
