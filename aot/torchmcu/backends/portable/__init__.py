"""The project's own kernels (firmware/kernels/portable/): float32, int8,
int4 and int16, bit-exact with torchmcu.reference. They run every op no
other backend took; a program is refused when an op has no kernel here."""
