# Development tool chain for the aemops.os_tuning collection.
#
#   make help       list the targets
#   make test       everything CI runs (.ci/run), on two workers side by side (scripts/test-lanes.py)
#   make check      the fast loop while working: lint, unit on 2.16, compat, integration (no VM)
#   make docs       the docs site (tests/output/docs/html): the plugins' reference and docs/
#   make deps       the Debian packages they need (requirements/system-packages.txt; run, check and test run it first)
#
# Environments (all rebuilt automatically when their requirements/*.txt lock changes;
# re-running any target is fast when nothing changed):
#   .venv              Python 3.11, ansible-core 2.16 + every controller tool (requirements/dev.txt)
#   .cache/venv-2.19   Python 3.11, ansible-core 2.19 + pytest (requirements/core-2.19.txt)
#   .cache/venv-2.21   Python 3.12, ansible-core 2.21, the newest (requirements/core-2.21.txt)
#   .cache/py2.7       pyenv 2.7.18, pytest 4.6 + mock + virtualenv (requirements/py2.7.txt)
#   .cache/py3.6       pyenv 3.6.15, pytest 7.0 (requirements/py3.6.txt)
#   .collections/ansible_collections/aemops/os_tuning -> ../../..  (see ansible.cfg)
#
# CI=true (as .ci/run sets it) makes missing target interpreters (2.7, 3.6, ...) an error;
# elsewhere they are reported and skipped.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules --no-print-directory

# .venv/bin first on PATH for every recipe: molecule, ansible-lint and ansible-test run
# ansible-config, ansible-doc, ansible-galaxy... by name.
export PATH := $(CURDIR)/.venv/bin:$(PATH)

NAMESPACE := $(shell sed -n 's/^namespace: *//p' galaxy.yml)
NAME      := $(shell sed -n 's/^name: *//p' galaxy.yml)

VENV      := .venv
VENV_219  := .cache/venv-2.19
VENV_221  := .cache/venv-2.21
COLL_LINK := .collections/ansible_collections/$(NAMESPACE)/$(NAME)

# Interpreter for both controller venvs (resolved lazily: pyenv first, then PATH).
CONTROLLER_PYTHON_VERSION := 3.11
CONTROLLER_PYTHON = $(shell scripts/find-python $(CONTROLLER_PYTHON_VERSION))
# ansible-core 2.20 and newer run on Python 3.12 or newer only.
NEWEST_CONTROLLER_PYTHON_VERSION := 3.12
NEWEST_CONTROLLER_PYTHON = $(shell scripts/find-python $(NEWEST_CONTROLLER_PYTHON_VERSION))

# Target Pythons of ansible-test's multi-version sanity tests (compile, import).
# RHEL 7: 2.7; RHEL 8: 3.6 (platform-python); RHEL 9: 3.9; 3.11/3.12: AppStream and the
# controller. ansible-core 2.19 supports targets from 3.8 on only.
SANITY_PYTHONS_216 ?= 2.7 3.6 3.9 3.11 3.12
SANITY_PYTHONS_219 ?= 3.9 3.11 3.12 3.13
# ansible-core 2.21 supports targets from 3.9 on.
SANITY_PYTHONS_221 ?= 3.9 3.11 3.12 3.13
# Interpreters for `make compat` (module and module_utils unit tests).
COMPAT_PYTHONS ?= 2.7 3.6

# Unit test directories: all of them for the controller runs, the target-side ones (modules,
# module_utils, the scripts the role runs on hosts, and the reports, which keep to the same Python) for compat.
UNIT_DIRS   ?= tests/unit
COMPAT_DIRS ?= tests/unit/plugins/modules tests/unit/plugins/module_utils tests/unit/plugins/plugin_utils tests/unit/roles

# Extra arguments, e.g. make sanity SANITY_ARGS='--test pylint'; make unit PYTEST_ARGS='-n 2 -k blockdev'
SANITY_ARGS ?=
PYTEST_ARGS ?=

ANSIBLE_LIB_216 = $(shell $(VENV)/bin/python -c 'import ansible, os; print(os.path.dirname(ansible.__file__))')

.PHONY: help
help: ## Show this help
	@echo "Targets (variables: SANITY_ARGS, PYTEST_ARGS, SANITY_PYTHONS_216/219, COMPAT_PYTHONS, CI):"
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) \
	  | awk 'BEGIN {FS = ":.*## "} {printf "  %-18s %s\n", $$1, $$2}'

# ---------------------------------------------------------------------------------------
# Environments

# System (Debian) packages: requirements/system-packages.txt, by group. make run, make check and
# make test check theirs first (scripts/deps: dpkg-query, silent when all are there) and install
# what is missing; DEPS= skips that (a machine that has the tools but no dpkg).
DEPS := $(or $(filter run check test,$(MAKECMDGOALS)),test)

.PHONY: deps
deps: ## Debian packages of DEPS (run, check, test; default: the goals', else test): names and installs what is missing, as root or with sudo -n
	@$(if $(strip $(DEPS)),scripts/deps $(DEPS),:)

.PHONY: venv
venv: ## Controller venvs (.venv: core 2.16 + tools; .cache/venv-2.19, .cache/venv-2.21), .collections link, ansible-test cache
	@py="$(CONTROLLER_PYTHON)"; newest="$(NEWEST_CONTROLLER_PYTHON)"; \
	if [ -z "$$py" ]; then \
	  echo "make venv: no Python $(CONTROLLER_PYTHON_VERSION) found (pyenv install $(CONTROLLER_PYTHON_VERSION), or apt-get install python3.11-venv)" >&2; \
	  exit 1; \
	fi; \
	if [ -z "$$newest" ]; then \
	  echo "make venv: no Python $(NEWEST_CONTROLLER_PYTHON_VERSION) found for ansible-core 2.21 (pyenv install $(NEWEST_CONTROLLER_PYTHON_VERSION))" >&2; \
	  exit 1; \
	fi; \
	scripts/mkvenv "$$py" $(VENV) requirements/dev.txt; \
	scripts/mkvenv "$$py" $(VENV_219) requirements/core-2.19.txt; \
	scripts/mkvenv "$$newest" $(VENV_221) requirements/core-2.21.txt
	@mkdir -p $(dir $(COLL_LINK))
	@ln -sfn ../../.. $(COLL_LINK)
	@scripts/seed-ansible-test-cache $(VENV)/bin/python $(VENV_219)/bin/python $(VENV_221)/bin/python

.PHONY: pyenvs
pyenvs: ## Target-interpreter envs .cache/py2.7 and .cache/py3.6 (from pyenv) for compat and sanity
	@for v in $(COMPAT_PYTHONS); do \
	  if py=$$(scripts/find-python $$v); then \
	    scripts/mkvenv "$$py" .cache/py$$v requirements/py$$v.txt; \
	  elif [ "$${CI:-}" = true ]; then \
	    echo "make pyenvs: Python $$v not found (pyenv install $$v) - required in CI" >&2; exit 1; \
	  else \
	    echo "make pyenvs: Python $$v not found (pyenv install $$v) - skipping its environment"; \
	  fi; \
	done

.PHONY: lock
lock: ## Re-resolve requirements/*.in into the pinned requirements/*.txt
	@py="$(CONTROLLER_PYTHON)"; \
	scripts/lock-requirements requirements/dev.in "$$py"; \
	scripts/lock-requirements requirements/core-2.19.in "$$py"; \
	scripts/lock-requirements requirements/core-2.21.in "$(NEWEST_CONTROLLER_PYTHON)"; \
	for v in $(COMPAT_PYTHONS); do \
	  scripts/lock-requirements requirements/py$$v.in "$$(scripts/find-python $$v)"; \
	done

# ---------------------------------------------------------------------------------------
# Lint

.PHONY: lint lint-ansible lint-ruff lint-yaml lint-vermin lint-changelog lint-docs
lint: lint-ansible lint-ruff lint-yaml lint-vermin lint-changelog lint-docs ## All linters (make -k lint to see every failure)

lint-ansible: venv ## ansible-lint, production profile (.ansible-lint)
	ansible-lint

lint-ruff: venv ## ruff check (ruff.toml: Python-2.7-safe rule set)
	ruff check plugins tests scripts

lint-yaml: venv ## yamllint (.yamllint)
	yamllint --strict .

# plugins/ must run on Python 2.7 (RHEL 7) and 3.6 (RHEL 8). "-t=X-" means "X or older
# must suffice"; a plain -t=2.7 would demand that 2.7 is the exact minimum.
lint-vermin: venv ## vermin: plugins/ must run on Python 2.7 and 3.6
	vermin -t=2.7- -t=3.6- --no-tips --violations --no-eval-annotations plugins/

lint-changelog: venv ## antsibull-changelog lint (changelogs/fragments)
	antsibull-changelog lint

lint-docs: venv ## antsibull-docs: validate plugin DOCUMENTATION/EXAMPLES/RETURN
	antsibull-docs lint-collection-docs --plugin-docs .

# ---------------------------------------------------------------------------------------
# Docs site

.PHONY: docs
docs: venv ## The docs site in tests/output/docs/html: the plugins' reference (antsibull-docs) and docs/, warnings as errors
	scripts/build-docs

# ---------------------------------------------------------------------------------------
# Sanity (ansible-test, no containers; see scripts/sanity)
#
# Every sanity test of each ansible-core runs (none is disabled or --skip-test'ed):
# 2.16: 32 tests, compile and import on each of SANITY_PYTHONS_216; 2.19: 24 tests,
# compile and import on each of SANITY_PYTHONS_219. Two only act when they have input:
# pslint (PowerShell files: there are none, and pwsh is not installed) and shellcheck
# (needs the shellcheck binary: make deps installs it for make test; under CI=true its absence fails).
# tests/sanity/ignore-2.16.txt and ignore-2.19.txt stay empty: fix the code instead.

.PHONY: sanity sanity-2.16 sanity-2.19 sanity-2.21
sanity: sanity-2.16 sanity-2.19 sanity-2.21 ## ansible-test sanity with ansible-core 2.16, 2.19 and 2.21

sanity-2.16: venv pyenvs ## ansible-test sanity, core 2.16, targets from SANITY_PYTHONS_216
	@targets=$$(scripts/target-pythons $(SANITY_PYTHONS_216)); \
	scripts/sanity 2.16 $(VENV) $$targets -- $(SANITY_ARGS)

sanity-2.19: venv ## ansible-test sanity, core 2.19, targets from SANITY_PYTHONS_219
	@targets=$$(scripts/target-pythons $(SANITY_PYTHONS_219)); \
	scripts/sanity 2.19 $(VENV_219) $$targets -- $(SANITY_ARGS)

sanity-2.21: venv ## ansible-test sanity, core 2.21 (the newest), targets from SANITY_PYTHONS_221
	@targets=$$(scripts/target-pythons $(SANITY_PYTHONS_221)); \
	scripts/sanity 2.21 $(VENV_221) $$targets -- $(SANITY_ARGS)

# ---------------------------------------------------------------------------------------
# Unit tests (see scripts/run-unit)

.PHONY: unit unit-2.16 unit-2.19 unit-2.21 unit-bench compat
unit: unit-2.16 unit-2.19 unit-2.21 unit-bench ## pytest tests/unit with ansible-core 2.16, 2.19 (Python 3.11) and 2.21 (3.12); tests/bench

unit-2.16: venv ## pytest tests/unit, ansible-core 2.16
	scripts/run-unit core-2.16 $(VENV)/bin/python - $(UNIT_DIRS) -- $(PYTEST_ARGS)

unit-2.19: venv ## pytest tests/unit, ansible-core 2.19
	scripts/run-unit core-2.19 $(VENV_219)/bin/python - $(UNIT_DIRS) -- $(PYTEST_ARGS)

unit-2.21: venv ## pytest tests/unit, ansible-core 2.21 (the newest)
	scripts/run-unit core-2.21 $(VENV_221)/bin/python - $(UNIT_DIRS) -- $(PYTEST_ARGS)

unit-bench: venv ## pytest tests/bench and tests/tools: bench/report.py, scripts/failure-excerpt.py (controller side, the dev venv; no VM)
	$(VENV)/bin/python -m pytest -q tests/bench tests/tools

compat: venv pyenvs ## Module and module_utils unit tests on Python 2.7 and 3.6 (core 2.16 module_utils)
	@failed=; \
	for v in $(COMPAT_PYTHONS); do \
	  if [ -x .cache/py$$v/bin/python ]; then \
	    scripts/run-unit py$$v .cache/py$$v/bin/python "$(ANSIBLE_LIB_216)" $(COMPAT_DIRS) -- $(PYTEST_ARGS) \
	      || failed="$$failed $$v"; \
	  elif [ "$${CI:-}" = true ]; then \
	    echo "make compat: no Python $$v environment - required in CI" >&2; failed="$$failed $$v"; \
	  else \
	    echo "make compat: Python $$v not available - SKIPPED (pyenv install $$v, then make compat)"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "make compat: FAILED on Python$$failed" >&2; exit 1; fi

# ---------------------------------------------------------------------------------------
# Later stages: the lead fills these in.

# ansible-runner (the library AWX uses) drives playbooks/migrate-aem.yml in audit mode against aliases of this
# machine, with ansible-core 2.16 and the newest, INJECT_FACTS_AS_VARS off, under strace; and playbooks/summary.yml
# builds one summary from the jsonfile fact cache of two --limit runs. Root and strace (make deps installs it for make test);
# 78-147 s measured on the loaded 2-core machine.
.PHONY: runner
runner: venv ## ansible-runner job of migrate-aem.yml (audit, localhost, 2.16 and 2.21, no writes outside its data dir) and summary.yml from a fact cache
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/runner $(PYTEST_ARGS)

# The shipped monitoring (extensions/prometheus, extensions/grafana): promtool check and test rules on textfiles that
# textfile_metrics wrote, the families against the rules and the dashboard, and a real scrape by Debian's node_exporter
# and Prometheus on 127.0.0.1 (prometheus, prometheus-node-exporter: make deps). Seconds; no root needed.
.PHONY: monitoring
monitoring: venv ## Prometheus rules and Grafana dashboard: promtool check/test rules, a real node_exporter + Prometheus scrape on 127.0.0.1
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/monitoring $(PYTEST_ARGS)

.PHONY: integration molecule run
integration: venv ## Real-kernel tests on loop devices (tests/integration/run.sh, when present)
	@if [ -x tests/integration/run.sh ]; then \
	  tests/integration/run.sh; \
	else \
	  echo "make integration: tests/integration/run.sh not present (or not executable) - nothing to run"; \
	fi

MOLECULE_VM_SCENARIOS ?= default upgrade cmdline auto
MOLECULE_USER_SCENARIOS ?= rhel7 rhel8 rhel9
# The controllers scenario, once per other controller: VENV:CORE:FULL (FULL adds the AEM
# failure checks and their reboot; the newest controller only). 2.16 runs every other scenario.
MOLECULE_CONTROLLERS ?= $(VENV_219):2.19:false $(VENV_221):2.21:true

molecule: venv ## molecule test of every VM scenario and of controllers on 2.19/2.21, one after another; syntax of the rhel* ones
	@failed=; for t in molecule-syntax $(addprefix molecule-,$(MOLECULE_VM_SCENARIOS)) molecule-controllers; do \
	  $(MAKE) $$t || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "molecule: failed:$$failed"; exit 1; fi

.PHONY: molecule-syntax molecule-controllers $(addprefix molecule-,$(MOLECULE_VM_SCENARIOS))
molecule-syntax: venv ## molecule syntax of the scenarios for your own hosts (rhel7/8/9)
	@for s in $(MOLECULE_USER_SCENARIOS); do molecule syntax -s $$s || exit 1; done

# One VM scenario: make molecule-default, molecule-upgrade, molecule-cmdline, molecule-auto.
$(addprefix molecule-,$(MOLECULE_VM_SCENARIOS)): molecule-%: venv
	@start=$$(date +%s); \
	if molecule test -s $*; then echo "molecule $*: passed in $$(( $$(date +%s) - start ))s"; \
	else echo "molecule $*: FAILED after $$(( $$(date +%s) - start ))s"; exit 1; fi

molecule-controllers: venv ## molecule test -s controllers once per controller in MOLECULE_CONTROLLERS
	@failed=; for c in $(MOLECULE_CONTROLLERS); do \
	  IFS=: read -r venv core full <<< "$$c"; start=$$(date +%s); \
	  if AEMOPS_CONTROLLER_VENV=$$venv AEMOPS_CONTROLLER_CORE=$$core AEMOPS_CONTROLLER_FULL=$$full \
	     molecule test -s controllers; then echo "molecule controllers (ansible-core $$core): passed in $$(( $$(date +%s) - start ))s"; \
	  else echo "molecule controllers (ansible-core $$core): FAILED after $$(( $$(date +%s) - start ))s"; failed="$$failed controllers-$$core"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "molecule: failed:$$failed"; exit 1; fi

.PHONY: vm-images
vm-images: ## Build or reuse every VM image (bookworm and its grub variant, bullseye) and the upgrade package caches
	tests/vm/vm.sh build --grub
	tests/vm/vm.sh build --release bullseye
	tests/vm/upgrade.sh cache "$$(tests/vm/vm.sh build --release bullseye | tail -n 1)" bookworm trixie

# The interpreter is pinned: discovery would pick a pyenv shim (python3.12) that fails here.
run: deps venv ## The main job: boot the VM preset (RHEL 8 on Nitro) and fix it with playbooks/migrate-aem.yml
	scripts/run-demo

.PHONY: bench bench-caps bench-fleet
bench: venv ## Measure on the VM: io_probe at 4096/128/32 KiB, role vs manual playbook, then bench-caps; writes bench/RESULTS.md
	bench/run.sh
	bench/caps.sh

bench-caps: venv ## Only the plateau under EBS-like caps (BENCH_CAPS=gp3): MiB/s over time before/after the role, the sweep, charts
	bench/caps.sh

bench-fleet: venv ## The controller's cost of an audit of 50 and 200 local aliases (forks 20), against the role before issue 23 and ansible-core alone, and the set_stats artifact at 50, 200 and 1,000 hosts; no VM
	$(VENV)/bin/python bench/fleet.py

.PHONY: build-test ee
build-test: venv ## Build the tarball, install it elsewhere, use it by FQCN only (ansible-doc, syntax checks)
	scripts/build-install-test

ee: venv ## Validate the execution environment definition (ansible-builder create; no container engine needed)
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	ansible-builder create -f meta/execution-environment.yml --context "$$tmp/context" --output-filename Containerfile >/dev/null; \
	test -s "$$tmp/context/Containerfile"; \
	echo "ansible-builder create: ok ($$(grep -c . "$$tmp/context/Containerfile") lines of Containerfile)"

# ---------------------------------------------------------------------------------------

# The phases of `make test`, in the order two workers take them (scripts/test-lanes.py): the
# image builds and the long upgrade scenario first, so that they overlap the CPU-bound checks
# on CI's 2 cores; a phase that boots a VM starts after vm-images. docs/testing.md has the
# measured split. TEST_WORKERS=1 runs them one after another.
TEST_PHASES := vm-images molecule-upgrade lint docs sanity unit compat build-test monitoring ee integration runner \
  molecule-default molecule-controllers molecule-auto run molecule-cmdline molecule-syntax

.PHONY: test check print-test-phases
test: deps venv pyenvs ## Everything CI checks, on two workers, with a phase table (scripts/test-lanes.py)
	python3 scripts/test-lanes.py $(TEST_PHASES)

check: deps venv pyenvs ## The day-to-day loop, under 10 minutes: lint, unit (2.16, bench) and compat side by side, then integration (no VM)
	@start=$$(date +%s); \
	$(MAKE) -j2 --output-sync=target lint unit-2.16 unit-bench compat; \
	$(MAKE) integration; \
	echo "make check: passed in $$(( $$(date +%s) - start ))s"

print-test-phases:
	@echo $(TEST_PHASES)

.PHONY: clean distclean
clean: ## Remove test output and tool caches
	rm -rf tests/output .pytest_cache .ruff_cache

distclean: clean ## clean, and remove every environment (.venv, .cache, .collections)
	rm -rf $(VENV) .cache .collections
