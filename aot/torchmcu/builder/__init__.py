"""Builds: firmware for a board (firmware.py, with each backend's part),
the host runner (host.py), the kernel table of a selective build
(kernel_table.py), and where the flash goes (size.py)."""
