# Entry points. `make demo` and `make test` set up .venv first (fast when nothing changed).
# DDS discovery stays on this machine: unset ROS_AUTOMATIC_DISCOVERY_RANGE knowingly if you want LAN discovery.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test bench colcon-build clean

setup:
	@tools/setup_env.sh

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

colcon-build: setup
	tools/colcon_build.sh

clean:
	rm -rf build install log

demo: setup
	$(VENV)/bin/vtm-estop-demo $(DEMO_ARGS)
