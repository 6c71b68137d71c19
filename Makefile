# `make run` and `make test` each set up their own virtual environment from a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# What the sandbox and the tests need from the system: isolation, interpreters, git.
SYSTEM_PACKAGES := bubblewrap python3 python3-venv nodejs git procps util-linux
# Nice to have inside the local sandbox for real analyses (not needed by the tests).
SANDBOX_EXTRAS := python3-pandas python3-matplotlib python3-numpy python3-openpyxl
# For the tests of charts saved by the Python kernel, of the Redis store and of SQL connections
# (each test starts its own redis-server, or its own PostgreSQL cluster, on a free loopback
# port).
TEST_EXTRAS := python3-matplotlib python3-pandas redis-server postgresql
# The tests mostly wait (on servers, sandboxes, processes), so they run in workers; one per
# core, as the disk-quota and CPU-limit tests judge timings a crowded machine would skew.
TEST_WORKERS ?= 2
# The program that runs inside the sandbox: its modules import each other by name there.
KERNEL_MODULES := $(patsubst %,-m %,$(basename $(notdir $(wildcard bot/sandbox/kernel/inside/sci_kernel*.py))))

.PHONY: run test lint bench system system-extras test-extras clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

system:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

system-extras:
	@dpkg -s $(SANDBOX_EXTRAS) >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(SANDBOX_EXTRAS))

test-extras:
	@dpkg -s $(TEST_EXTRAS) >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(TEST_EXTRAS))

# Usage: make run ARGS='ask --csv data.csv "question"'
run: system system-extras $(BIN)/.installed
	$(BIN)/python -m bot $(ARGS)

test: system test-extras $(BIN)/.installed
	$(BIN)/ruff check bot tests bench
	$(BIN)/ruff format --check bot tests bench
	$(BIN)/mypy
	MYPYPATH=bot/sandbox/kernel/inside $(BIN)/mypy $(KERNEL_MODULES)
	$(BIN)/lint-imports
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=30

bench: system system-extras $(BIN)/.installed
	$(BIN)/python -m bench.run_code_roundtrip
	$(BIN)/python -m bench.kernel
	$(BIN)/python -m bench.kernel_flood
	$(BIN)/python -m bench.cpu_watch
	$(BIN)/python -m bench.buddy_run_code
	$(BIN)/python -m bench.slack_latency
	$(BIN)/python -m bench.slack_agent
	$(BIN)/python -m bench.kill_restart
	$(BIN)/python -m bench.tokens
	$(BIN)/python -m bench.file_intake
	$(BIN)/python -m bench.datacard
	$(BIN)/python -m bench.card_turns
	$(BIN)/python -m bench.concurrency
	$(BIN)/python -m bench.model_turn_cpu
	$(BIN)/python -m bench.replicas
	$(BIN)/python -m bench.idle_threads
	$(BIN)/python -m bench.long_threads
	$(BIN)/python -m bench.sql_copy
	$(BIN)/python -m bench.memory_tokens
	$(BIN)/python -m bench.detached_waits
	$(BIN)/python -m bench.sparse_outputs
	$(BIN)/python -m bench.reaper_cost
	$(BIN)/python -m bench.first_answer
	$(BIN)/python -m bench.resume

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
