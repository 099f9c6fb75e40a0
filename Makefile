# torchmcu: `make demo` and `make test` set everything up themselves.
#   make setup   Debian packages (toolchain, QEMU, flatc) + the Python venv
#   make demo    train, compile, build and run the digits MLP in QEMU
#   make test    the whole test suite
#   make fuzz    10 minutes of libFuzzer over the loader (clang)
#   make bench   MLPerf Tiny int8 on every board: bench/results.{json,md}, plots
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# torch first and pinned: pip then takes the local CPU wheel, never a newer build.
PIP_PACKAGES := torch==2.13.0 "torchao>=0.18,<0.19" numpy flatbuffers pytest scikit-learn tflite-micro tflite

.PHONY: setup system demo test fuzz bench clean

setup: system $(STAMP)

system:
	@tools/setup-system.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check $(PIP_PACKAGES)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

demo: setup
	$(PY) examples/digits_demo.py
	$(PY) examples/digits_demo.py --quant int8

# pytest exits 5 when it collected no tests: a suite that runs nothing fails.
test: setup
	@$(PY) -m pytest -q $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

# Every bundled model on every QEMU board (and CMSIS-NN when TORCHMCU_CMSIS_NN_DIR
# is set): bench/results.json, results.md, plots. Not part of `make test`.
bench: setup
	$(VENV)/bin/pip install -q --disable-pip-version-check matplotlib
	$(PY) bench/run.py

# libFuzzer over the program loader and method init, seeded with compiled programs.
fuzz: setup
	$(PY) -m torchmcu.fuzz --seconds 600

clean:
	rm -rf build .pytest_cache
