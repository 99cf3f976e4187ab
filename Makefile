# strata: `make demo` sets everything up and profiles the seed's example;
# `make test` sets everything up and runs the whole test suite.
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
ASANVENV := .venv-asan
# libdw-dev and libunwind-dev: the headers of the native symboliser and unwinder
# (src/sampling), libpapi-dev PAPI's (the papi: counters, src/system/hwc.c); the
# libraries are loaded with dlopen, and without the headers those paths are
# compiled out.
DEBS    := build-essential cmake pkg-config libpcre2-dev python3-dev python3-venv \
           libdw-dev libunwind-dev libpapi-dev
# debootstrap makes the Debian roots of the other Pythons' legs (trixie: 3.13; forky:
# 3.14 and 3.15; make test-py313 test-py314 test-py315).
LEG_DEBS := debootstrap
# Extra Debian packages installed into those roots for tests that use them (libunwind and
# libdw: native stacks, as on the host; PAPI: the papi: counters).
PYLEG_DEBS := graphviz protobuf-compiler libunwind-dev libdw-dev libpapi-dev g++ librsvg2-bin
# Test-only Debian packages: protobuf-compiler decodes traces, graphviz renders graphs,
# Open MPI runs the 4-rank mpi4py job (mpi4py itself comes from requirements-dev.txt)
# and, with MPICH (its headers also build strata's MPICH wrappers), the MPI tests,
# gfortran builds the Fortran API's test program, libomp-dev (LLVM's OpenMP, with OMPT)
# the OpenMP one, libtrilinos-kokkos-dev (Trilinos' Kokkos 3) a real Kokkos program.
TEST_DEBS := graphviz chromium clang protobuf-compiler openmpi-bin libopenmpi-dev gfortran \
             libomp-dev mpich libmpich-dev libtrilinos-kokkos-dev librsvg2-bin

.PHONY: all deps venv build demo test test-c test-tsan test-py test-asan test-py313 test-py314 test-py315 bench bench-recorder clean fuzz

all: build

# Debian packages, installed only when one is missing (apt-get update once first).
deps:
	@missing=""; for p in $(DEBS) $(TEST_DEBS) $(LEG_DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

venv: deps $(PY)
	$(PY) -m pip install -q -r requirements-dev.txt

build: venv
	$(PY) -m pip install -q --no-build-isolation .
	@$(VENV)/bin/strata --version >/dev/null

demo: build
	cd examples && STRATA_PROFILE=ON STRATA_COMPONENTS=trip_count,wall_clock \
	  ../$(VENV)/bin/strata python -o ../demo-output -- ./example.py
	@echo "results in demo-output/"

test-c: deps
	cmake -S . -B build/ctest -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build/ctest -j2 >/dev/null
	cd build/ctest && ctest --output-on-failure

# The C unit tests again under ThreadSanitizer: the recorder from plain pthreads and
# from a signal handler (tests/c/test_recorder.c) must show no data race.
test-tsan: deps
	cmake -S . -B build/tsan-ctest -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=tsan >/dev/null
	cmake --build build/tsan-ctest -j2 >/dev/null
	cd build/tsan-ctest && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure

test-py: build
	$(PY) -m pytest -q tests

# The same Python suite against a build with AddressSanitizer and
# UndefinedBehaviorSanitizer; the interpreter itself is not instrumented, so the
# runtime is preloaded and leak checking (which would report CPython's own) is off.
test-asan: deps
	@[ -x $(ASANVENV)/bin/python ] || $(PYTHON) -m venv $(ASANVENV)
	$(ASANVENV)/bin/python -m pip install -q -r requirements-dev.txt
	STRATA_SANITIZE=asan-ubsan $(ASANVENV)/bin/python -m pip install -q --no-build-isolation \
	  --config-settings=build-dir=build/asan .
	cmake -S . -B build/asan-ctest -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=asan-ubsan >/dev/null
	cmake --build build/asan-ctest -j2 >/dev/null
	cd build/asan-ctest && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure
	LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  STRATA_TEST_SANITIZED=1 $(ASANVENV)/bin/python -m pytest -q -x tests

# The whole suite again on CPython 3.13, 3.14 and 3.15 (the sys.monitoring backend),
# built and run in Debian roots made once by debootstrap and reused
# (/var/tmp/strata-trixie, /var/tmp/strata-forky). Skipped, with the reason, where they
# cannot run (not root, no debootstrap).
test-py313: deps
	STRATA_LEG_DEBS="$(PYLEG_DEBS)" bash scripts/pyleg.sh 3.13 test
test-py314: deps
	STRATA_LEG_DEBS="$(PYLEG_DEBS)" bash scripts/pyleg.sh 3.14 test
test-py315: deps
	STRATA_LEG_DEBS="$(PYLEG_DEBS)" bash scripts/pyleg.sh 3.15 test

test: test-c test-tsan test-py test-asan test-py313 test-py314 test-py315

# Fuzzes the profile.json reader (and the writers behind it) with libFuzzer for
# FUZZ_SECONDS (default 600); not part of `make test`. Crashes land in build/fuzz/.
FUZZ_SECONDS ?= 600
fuzz: deps
	CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DSTRATA_FUZZ=ON \
	  -DSTRATA_SANITIZE=asan-ubsan >/dev/null
	cmake --build build/fuzz -j2 --target fuzz_profile >/dev/null
	mkdir -p build/fuzz/corpus && cp tests/fuzz/corpus/* build/fuzz/corpus/
	cd build/fuzz && ./fuzz_profile -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 corpus

bench: build
	$(PY) bench/run.py

# enter+exit ns of the recorder against today's call tree + timeline (C only, a few
# seconds; the figures go in docs/engine.md).
bench-recorder: deps
	cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build/bench -j2 --target recorder_bench >/dev/null
	build/bench/recorder_bench 25 30

clean:
	rm -rf build $(VENV) $(ASANVENV) demo-output
