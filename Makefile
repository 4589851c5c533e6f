# drctl — the two commands of the README, and what they need. Each target sets up what a fresh
# machine lacks (virtualenv, Python packages; Kafka and Spark connector jars are fetched from
# Maven Central by drctl itself on first use).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LAB    ?= lab

.PHONY: setup bytecode java-and-maven demo test test-matrix test-times lint typecheck unit clean-lab

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

setup: $(BIN)/.installed

# drctl's bytecode, written ahead (only what changed since): where PYTHONDONTWRITEBYTECODE is
# set (it is on the team's machines), every drctl process — each CLI run, runbook step and
# client child a test or a drill starts — would compile drctl's modules from source again
# (`drctl --help`: 0.85 s of CPU without, 0.55 s with).
bytecode: setup
	@$(BIN)/python -m compileall -q drctl

# The lab (demo, lab tests) runs Kafka from Maven Central's jars: Java and Maven. Unit tests
# need neither.
java-and-maven:
	@command -v java >/dev/null || { echo "Java 17+ is required (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required (apt-get install maven)"; exit 1; }

## The main job on the local lab: a full DR drill (outage, failover, failback, checks).
demo: bytecode java-and-maven
	$(BIN)/drctl lab down --dir $(LAB) --purge
	$(BIN)/drctl lab up --dir $(LAB)
	$(BIN)/drctl --config $(LAB)/drctl.yaml runbook run runbooks/drill.yaml --yes \
		--report-dir $(LAB)/drill-reports --junit $(LAB)/drill-junit.xml
	@echo "Drill report: $(LAB)/drill-reports/; incident reports: $(LAB)/state/reports/"
	@# The cycle is done when the pair is protected again: status says so (exit 0).
	$(BIN)/drctl --config $(LAB)/drctl.yaml status

lint: setup
	$(BIN)/ruff check drctl tests bench

typecheck: setup
	$(BIN)/mypy

## Lint, type check and every test (lab tests start real Kafka and MirrorMaker 2).
# Five pytest-xdist workers (the suite waits on clusters as much as it computes: with four
# the 2 cores were idle 15 % of the run, most in its second half; with five 7.5 %, and
# 1,612 s against 1,715 s on a fresh clone), each with its own labs on its own ports, a group of tests per
# lab (tests/conftest.py `xdist_group`), the groups handed out heaviest first in the order
# conftest sorts them (--no-loadscope-reorder: xdist would sort them by test count), and
# one Spark Connect server for the whole run. TEST_WORKERS=0 runs in one process.
# A worker that dies fails the run (--max-worker-restart 0): a replaced one can hang xdist.
# Per commit the version x naming matrix runs on its diagonal (Kafka 4.x kept, 3.9
# prefixed) and repetitions at their per-commit counts; `make test-matrix` runs all of it.
# Every test's time goes to $(TEST_TIMES), whose tail (the slowest) is printed after.
TEST_WORKERS ?= 5
TEST_TIMES   ?= test-times.txt
PYTEST_RUN = DRCTL_TEST_TIMES=$(abspath $(TEST_TIMES)) $(BIN)/pytest -n $(TEST_WORKERS) \
	--dist loadgroup --no-loadscope-reorder --max-worker-restart 0

# The gap job's class archive (gap/class_archive.py) is recorded once per machine, by a
# small job started first (else each worker's first job of its own would record it at once,
# slowly, under the others' load): 30 s of a core and a half that used to hold up the rest.
# It runs while lint and the type check run (a core) and into the tests' start; only a job
# of its own maps the archive, and the suite's first such job comes minutes in (one that
# came sooner would record one too: slower, never wrong). The recording ends with the run.
RECORD_LOG ?= record-classes.log

# The tests' bytecode (pytest's, assertions rewritten) is written by a collection of its own
# beside lint and the type check: where PYTHONDONTWRITEBYTECODE is set pytest rewrites every
# test module in each worker at its start instead (6.7-7 s of CPU a worker, 2.1 s with the
# bytecode written; five workers on 2 cores), and cannot keep what it did.
TEST_BYTECODE = env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest --collect-only -q \
	-p no:cacheprovider $(PYTEST_ARGS) > /dev/null

test: setup bytecode java-and-maven
	@$(BIN)/python -m drctl.gap.job --record-classes > $(RECORD_LOG) 2>&1 & rec=$$!; \
		$(TEST_BYTECODE) 2>&1 & pyc=$$!; \
		trap 'kill $$rec $$pyc 2>/dev/null' EXIT INT TERM; \
		$(MAKE) --no-print-directory lint typecheck || exit 1; \
		wait $$pyc || echo "the tests' bytecode was not written ahead: each worker rewrites them"; \
		$(PYTEST_RUN) $(PYTEST_ARGS); status=$$?; \
		wait $$rec; recorded=$$?; tail -n 1 $(RECORD_LOG); \
		$(MAKE) --no-print-directory test-times; \
		[ $$status -ne 0 ] && exit $$status; exit $$recorded

## The full version x naming matrix and every repetition at its full count: run it before
## an issue that touches a procedure, the lab or the client layer is resolved.
test-matrix: PYTEST_ARGS = --matrix
test-matrix: test

test-times:
	@test -f $(TEST_TIMES) && { echo "--- the slowest tests (all: $(TEST_TIMES)) ---"; \
		grep -v '^#' $(TEST_TIMES) | tail -n 40; grep '^#' $(TEST_TIMES); } || true

unit: setup
	$(BIN)/pytest tests/unit

clean-lab: setup
	$(BIN)/drctl lab down --dir $(LAB) --purge
