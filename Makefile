# torchmcu: `make demo` and `make test` set everything up themselves.
#   make setup   Debian packages (toolchain, QEMU, flatc) + the Python venv
#   make demo    train, compile, build and run the digits MLP in QEMU
#   make test    the test suite, less the model zoo (under 20 minutes on 2 cores)
#   make zoo     the model zoo: torchvision and timm CNNs, sequence models in QEMU (CI runs it too)
#   make fuzz    10 minutes of libFuzzer over the loader (clang)
#   make bench   MLPerf Tiny int8 beside TFLM + CMSIS-NN, the CNN and sequence zoos (RAY=auto|ADDRESS: on Ray)
#   make pack    the runtime as a CMSIS-Pack: build/pack/torchmcu.runtime.<version>.pack
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# torch first and pinned: pip then takes the local CPU wheel, never a newer build.
PIP_PACKAGES := torch==2.13.0 "torchao>=0.18,<0.19" numpy flatbuffers pytest scikit-learn tflite-micro tflite matplotlib \
	xmlschema cmsis-pack-manager cmake ninja pyserial pyyaml ethos-u-vela jsonschema ml-dtypes semver \
	pytest-xdist pillow ray==2.52.1 huggingface_hub safetensors onnx
# tosa-tools pins numpy<2.2 and an old flatbuffers; it runs with the numpy above,
# so it goes in without its pins (its other dependencies are listed above).
# torchvision 0.28.0 is the release for torch 2.13.0, torchaudio 2.11.0 the newest (it
# pins no torch); both are CUDA builds whose compiled ops do not load beside the CPU
# torch: their model definitions import through torchmcu.frontend.compat.
# timm 1.0.31 (the MCU-class zoo, tests/test_zoo_timm.py) would take torch and torchvision
# as dependencies: without them; its others (huggingface_hub, safetensors, pyyaml) are above.
# silero-vad ships trained weights the numerics tests use (tests/test_trained_lstm.py;
# safetensors, above, reads them); its own dependencies are not needed.
# onnx2torch (compile's ONNX files; onnx, above, reads them) would take torch and torchvision
# as dependencies: without them.
PIP_NODEPS := tosa-tools torchvision==0.28.0 torchaudio==2.11.0 timm==1.0.31 silero-vad onnx2torch

.PHONY: setup system demo test zoo fuzz bench pack clean

setup: system $(STAMP)

system:
	@tools/setup-system.sh

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check $(PIP_PACKAGES)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps $(PIP_NODEPS)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

demo: setup
	$(PY) examples/digits_demo.py
	$(PY) examples/digits_demo.py --quant int8

# pytest exits 5 when it collected no tests: a suite that runs nothing fails.
# The tests run on every core (pytest-xdist; loadgroup: a file's tests that share its module- or
# session-scoped fixtures run on one worker, tests/conftest.py); PYTEST_ARGS adds to the command.
# The zoo (pytest mark `zoo`) runs apart: `make zoo`, which .ci/run runs after it.
test: setup
	@$(PY) -m pytest -q -n auto --dist loadgroup -m "not zoo" $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

# torchvision CNNs and sequence models (random weights) compiled, built and run in
# QEMU with the check at int8 and float32: tests/test_zoo_*.py. Each prints a `zoo:`
# line of figures (instructions, flash, RAM, SQNR).
zoo: setup
	@bash -c 'set -o pipefail; $(PY) -m pytest -q -n auto --dist loadgroup -m zoo -rA --show-capture=stdout $(PYTEST_ARGS) \
		| grep -v -e "^PASSED" -e "^_* *test_zoo" -e "^-* Captured"'; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make zoo: pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

# Every bundled model on every QEMU board (and CMSIS-NN when TORCHMCU_CMSIS_NN_DIR
# is set), beside the TFLM + CMSIS-NN baselines (bench/baselines.json): bench/results.json,
# results.md, plots; then the torchvision CNN zoo (bench/zoo.md) and the sequence zoo
# (bench/sequence_zoo.md) at int8; the MLPerf Tiny models' estimated cycles and ms on the
# NUCLEO-L4R5ZI and NUCLEO-U575ZI-Q board files (bench/cycles.md). RAY=auto runs the MLPerf cases as tasks on a local Ray
# cluster, RAY=<address> on an existing one. Not part of `make test`.
bench: setup
	$(VENV)/bin/pip install -q --disable-pip-version-check matplotlib
	$(PY) bench/run.py $(if $(RAY),--ray $(RAY))
	$(PY) bench/zoo.py
	$(PY) bench/sequence_zoo.py
	$(PY) bench/cycles.py

# libFuzzer over the program loader and method init, seeded with compiled programs.
# Its build, corpus and crash artifacts: $TORCHMCU_CACHE_DIR/fuzz (default ~/.cache/torchmcu/fuzz).
fuzz: setup
	$(PY) -m torchmcu.fuzz --seconds 600

# The runtime as a CMSIS-Pack (file lists from the tree, metadata from
# cmsis-pack/torchmcu.pdsc.in); PACK_URL is where it will be published.
pack: setup
	$(PY) -m torchmcu.export.pack -o build/pack $(if $(PACK_URL),--url $(PACK_URL))

# The shared caches (firmware objects, host runner, CMSIS-NN library, fuzzer) are in
# $TORCHMCU_CACHE_DIR (default ~/.cache/torchmcu), outside the tree.
clean:
	rm -rf build .pytest_cache
