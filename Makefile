# Entry points. `make demo` and `make test` set up .venv first (fast when nothing changed).
# Isolation (docs/security.md): DDS discovery stays on this machine unless you set ROS_AUTOMATIC_DISCOVERY_RANGE
# knowingly (an empty value counts as unset: rcl would read it as SUBNET); the programs also bind their DDS sockets
# to loopback, and `make demo` runs in a private random domain unless ROS_DOMAIN_ID is set.
ifeq ($(strip $(ROS_AUTOMATIC_DISCOVERY_RANGE)),)
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
endif
VENV ?= .venv
PY := $(VENV)/bin/python
# test worker processes (pytest-xdist; 0 runs the suite in this process). Each worker reserves its own private ROS
# domain, and the tests of one module stay on one worker so that they share its set-up. Each worker's BLAS runs on
# one thread: with the cores already busy, OpenBLAS's spinning threads cost 5x the CPU (measured: a dense solvability
# test took 25 s of CPU on two threads and 4.8 s on one, on a loaded 2-core machine).
TEST_WORKERS ?= 2
TEST_THREADS := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: setup browser demo test test-kernels bench colcon-build clean

setup:
	@tools/setup_env.sh

# the browser tests of the 3-D views need Chromium (Debian's package); only the tests install it
browser:
	@tools/install_browser.sh

test: setup browser
	$(TEST_THREADS) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# the numerical tests most sensitive to the floating-point kernels, under other OpenBLAS core types (.ci/run runs it)
test-kernels: setup
	$(TEST_THREADS) VENV=$(VENV) tools/rerun_with_other_kernels.sh

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

colcon-build: setup
	tools/colcon_build.sh

clean:
	rm -rf build install log

demo: setup
	$(VENV)/bin/vtm-estop-demo $(DEMO_ARGS)
