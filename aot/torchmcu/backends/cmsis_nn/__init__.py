"""The CMSIS-NN backend: Arm's optimised kernels for the int8, int4 and
int16 ops it has (firmware/kernels/cmsis_nn/), the rest on the portable
kernels.

The program does not change with the kernels: every op CMSIS-NN may run
gets the scratch its kernels ask for on any core (scratch.py), so one
model.pte runs with either set, and `torchmcu build --kernels cmsis-nn`
picks CMSIS-NN when building (build.py). fetch.py gets its pack for
`torchmcu deps cmsis-nn`.
"""
