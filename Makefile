# drctl — the two commands of the README, and what they need. Each target sets up what a fresh
# machine lacks (virtualenv, Python packages; Kafka and Spark connector jars are fetched from
# Maven Central by drctl itself on first use).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LAB    ?= lab

.PHONY: setup java-and-maven demo test lint typecheck unit clean-lab

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

setup: $(BIN)/.installed

# The lab (demo, lab tests) runs Kafka from Maven Central's jars: Java and Maven. Unit tests
# need neither.
java-and-maven:
	@command -v java >/dev/null || { echo "Java 17+ is required (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required (apt-get install maven)"; exit 1; }

## The main job on the local lab: a full DR drill (outage, failover, failback, checks).
demo: setup java-and-maven
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
# Three pytest-xdist workers, each with its own labs on its own ports, a file per worker (the
# prefixed lab's tests on two workers, the secure lab's on one: tests/conftest.py
# `xdist_group`), and one Spark Connect server for the whole run. On the 2-core CI machine a
# fresh clone's run takes 21–23 min, the cores busy most of the time. TEST_WORKERS=0 runs
# in one process.
# A worker that dies fails the run (--max-worker-restart 0): a replaced one can hang xdist.
TEST_WORKERS ?= 3

test: lint typecheck java-and-maven
	@# The gap job's class archive, recorded once before the workers start (else each
	@# worker's first gap job records it at once, slowly, under the others' load).
	$(BIN)/python -m drctl.gap.job --record-classes
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --max-worker-restart 0 --durations=40

unit: setup
	$(BIN)/pytest tests/unit

clean-lab: setup
	$(BIN)/drctl lab down --dir $(LAB) --purge
