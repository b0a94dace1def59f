# Quick start: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.raa-installed
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: install test test-slow test-all demo lint bench clean

# `make test` runs on TEST_WORKERS processes (pytest-xdist): serially it kept one core of two busy for ~15 min.
# A test file goes to one worker as a whole (--dist loadfile): its module-scope fixtures (clips, tiny models) are
# built once, as in a serial run. `make test TEST_WORKERS=0` runs it in one process; `pytest tests/test_x.py` stays
# serial. test-slow and test-all run in two passes: the tests not marked `distributed` on the workers (single
# processes and single-rank launches), then the `distributed` ones (2-rank torchrun / DeepSpeed / spawned launches
# with deadlines of 45-600 s) in one process, one launch at a time as before:
# with them on two workers of a 2-core machine that other jobs loaded (load ~14), a spawned rank of
# tests/test_spawned_launches.py did not even start within its 45 s deadline (1 run of 2; the other, at load ~9,
# passed), where serial runs at load 12-17 passed.
# The second pass runs even when the first fails; the target fails if either did.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile
# test-slow / test-all: PYTEST_SPLIT "MARKS" runs `pytest -m "MARKS and not distributed"` on the workers, then
# `pytest -m "MARKS and distributed" DISTRIBUTED_FILES` serially. The serial pass collects only the test files that
# name the mark (DISTRIBUTED_FILES; tests/test_make_test_workers.py checks that none holding the mark is missed):
# collecting the whole suite a second time to deselect all but these cost ~37 s on a quiet machine (at load ~15: 53 s
# of CPU against 11 s for these files, the same 56 tests collected).
DISTRIBUTED_FILES = $(shell grep -l -E 'mark[.]distributed' tests/test_*.py)
PYTEST_SPLIT = status=0; \
	$(PY) -m pytest -m "$(1) and not distributed" $(XDIST) || status=$$?; \
	$(PY) -m pytest -m "$(1) and distributed" $(DISTRIBUTED_FILES) || status=$$?; \
	exit $$status

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

# torch first: torch==2.13.0 unless some torch already imports, so that the project's own
# install resolves against it instead of choosing a torch itself. On the CI machines that
# pin is a CPU wheel the package index offers; elsewhere pip picks the platform's default
# build (CUDA on Linux from PyPI): install a CPU build into .venv first if you want one.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[dev,service,sim,wandb]"
	# CoTracker3 architecture for the (slow) real-model test only; CC-BY-NC code, never vendored.
	$(PY) -m pip install --no-deps --ignore-requires-python napari-cotrack==0.1.7 || echo "napari-cotrack unavailable: CoTracker3 test will skip"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(XDIST)

test-slow: $(STAMP)
	$(call PYTEST_SPLIT,slow and not gpu)

test-all: $(STAMP)
	$(call PYTEST_SPLIT,not gpu)

demo: $(STAMP)
	$(VENV)/bin/raa demo --out demo_out

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	# -P keeps benchmarks/ off sys.path (benchmarks/tools.py would shadow the tools package)
	for b in benchmarks/[!_]*.py; do echo "== $$b"; $(PY) -P $$b || exit 1; done

clean:
	rm -rf demo_out runs .pytest_cache
