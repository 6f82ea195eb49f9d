# Entry points. `make demo` and `make test` set up .venv first (fast when nothing changed).
# Isolation (docs/security.md): DDS discovery stays on this machine unless you set ROS_AUTOMATIC_DISCOVERY_RANGE
# knowingly (an empty value counts as unset: rcl would read it as SUBNET); the programs also bind their DDS sockets
# to loopback, and `make demo` runs in a private random domain unless ROS_DOMAIN_ID is set.
ifeq ($(strip $(ROS_AUTOMATIC_DISCOVERY_RANGE)),)
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
endif
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup browser demo test bench colcon-build clean

setup:
	@tools/setup_env.sh

# the browser tests of the 3-D views need Chromium (Debian's package); only the tests install it
browser:
	@tools/install_browser.sh

test: setup browser
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

colcon-build: setup
	tools/colcon_build.sh

clean:
	rm -rf build install log

demo: setup
	$(VENV)/bin/vtm-estop-demo $(DEMO_ARGS)
