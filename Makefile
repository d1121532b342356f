# Every target works on a fresh machine: `setup` installs what the others need.
# Test environment (uv, .venv) and clashing tools (aws-sam-cli, checkov: own uv tool envs under
# .tools/) stay apart, as their boto3 pins conflict.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PY313 := $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13.*/bin/python3.13) $(shell command -v python3.13 2>/dev/null))
export UV_PYTHON := $(PY313)
export UV_TOOL_DIR := $(CURDIR)/.tools/envs
export UV_TOOL_BIN_DIR := $(CURDIR)/.tools/bin
# sam build checks the runtime's python on PATH.
export PATH := $(UV_TOOL_BIN_DIR):$(dir $(PY313)):$(PATH)
export SAM_CLI_TELEMETRY := 0
# The machines set PYTHONDONTWRITEBYTECODE: every process then compiled the project's own modules
# from source (emulator, harness, ops: ~0.4 s of CPU a process) and pytest rewrote every test
# module's asserts again (~4.5 s of a unit collection's 14). Compiled once, read by the rest.
unexport PYTHONDONTWRITEBYTECODE
# No default region here: against a deployed stack the region is the AWS profile's (or
# AWS_REGION's); the local stack, the demo and the tests set their own.

UV := uv
SAM_CLI_VERSION := 1.170.0
CHECKOV_VERSION := 3.3.30
# The AWS CLI the docs' commands use (tests/integration/test_docs.py runs them).
AWSCLI_VERSION := 1.45.11
STAMP = .tools/.installed-$(UV_VERSION)-$(SAM_CLI_VERSION)-$(CHECKOV_VERSION)-$(AWSCLI_VERSION)
# Hash-locked (`make locks` rewrites them from these pins): what ships in the layer, and the one
# tool the deploy jobs run (the SAM CLI; its boto3 serves their scripts), nothing else there.
POWERTOOLS_VERSION := 3.37.0
UV_VERSION := 0.13.8
DEPLOY_TOOLS := .tools/deploy
LOCK := $(UV) pip compile --quiet --generate-hashes --no-annotate --python-version 3.13 --custom-compile-command "make locks"

# The fan-out mode of the local stack that up, run, chaos and integration start (template
# parameter FanOut, docs/design.md "Fan-out modes"): lambda, pipe, router, pipe-topic or pipe-sfn.
# `make test` runs the integration suite and chaos in each of FANOUT_MODES. A deployed stack
# (AWS_SAM_STACK_NAME) runs in the mode it was deployed with.
FANOUT ?= lambda
FANOUT_MODES := lambda pipe router pipe-topic pipe-sfn

.PHONY: help setup lint unit integration integration-modes sam-local test up run chaos chaos-modes bench build clean iam-report locks deploy-tools dynamodb-conformance behaviour behaviour-tools behaviour-locks behaviour-local

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
	@echo "FANOUT=lambda|pipe|router|pipe-topic|pipe-sfn (default lambda): the local stack's fan-out mode for up, run, chaos, integration"

# Byte-compiled at install: the machines set PYTHONDONTWRITEBYTECODE, so otherwise every process
# (pytest workers, each local stack, each function worker) compiles boto3 and moto from source.
# Debian's chromium opens the dashboard page in tests/integration/test_dashboard.py; installed as
# root with apt-get, as samlocal installs Docker.
setup: $(STAMP) ## install the test environment and the tools
	$(UV) sync --frozen --compile-bytecode
	command -v chromium >/dev/null || { echo "make setup: chromium (the dashboard test's browser) by apt-get, as root"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

# uv too, pinned, into .tools/bin: where the README's PATH line finds it in a new shell.
$(STAMP):
	@test -n "$(PY313)" || { echo "Python 3.13 not found (pyenv or python3.13 on PATH)"; exit 1; }
	@command -v $(UV) >/dev/null || echo "make setup: no uv on PATH: uv $(UV_VERSION) by pip into $(PY313) first"
	@echo "make setup: uv $(UV_VERSION), the SAM CLI $(SAM_CLI_VERSION), checkov $(CHECKOV_VERSION) and the AWS CLI $(AWSCLI_VERSION) into .tools/ (then the test environment into .venv)"
	command -v $(UV) >/dev/null || $(PY313) -m pip install --quiet uv==$(UV_VERSION)
	$(UV) tool install --quiet --compile-bytecode uv==$(UV_VERSION)
	$(UV) tool install --quiet --compile-bytecode aws-sam-cli==$(SAM_CLI_VERSION)
	$(UV) tool install --quiet --compile-bytecode checkov==$(CHECKOV_VERSION)
	$(UV) tool install --quiet --compile-bytecode awscli==$(AWSCLI_VERSION)
	touch $@

# The deploy jobs install only this (no test environment, no checkov), every file by its hash.
deploy-tools: ## the SAM CLI alone into .tools/deploy, from the hash lock pipeline/deploy-tools.txt
	$(UV) venv --quiet --allow-existing --python $(PY313) $(DEPLOY_TOOLS)
	$(UV) pip install --quiet --require-hashes --python $(DEPLOY_TOOLS)/bin/python -r pipeline/deploy-tools.txt

# The behaviour suite's rivals (behaviour/targets.py), each in an environment of its own under
# .tools/behaviour/, every file by its hash: moto's server apart from the test environment's
# moto (the stack's own), which may be another version.
MINISTACK_VERSION := 1.5.33
MOTO_RIVAL_VERSION := 5.2.6
BEHAVIOUR_RIVALS := ministack moto
BEHAVIOUR_LOCK := $(UV) pip compile --quiet --generate-hashes --no-annotate --python-version 3.13 --python-platform x86_64-manylinux_2_28 --custom-compile-command "make behaviour-locks"

# Needs the package index: the layer for Lambda (arm64), the deploy tools, uv and the audit tool
# (pip-audit, .github/workflows/locks.yaml) for the runners. A lock keeps the versions it has
# within the top-level pins; `make locks UPGRADE=--upgrade` takes the newest (the weekly workflow).
locks: ## rewrite the hash locks: layers/shared/requirements.txt, pipeline/deploy-tools.txt, pipeline/uv.txt, pipeline/audit-tools.txt (UPGRADE=--upgrade: newest dependencies)
	echo "aws-lambda-powertools==$(POWERTOOLS_VERSION)" | $(LOCK) $(UPGRADE) --python-platform aarch64-manylinux_2_28 - -o layers/shared/requirements.txt
	echo "aws-sam-cli==$(SAM_CLI_VERSION)" | $(LOCK) $(UPGRADE) --python-platform x86_64-manylinux_2_28 - -o pipeline/deploy-tools.txt
	echo "uv==$(UV_VERSION)" | $(LOCK) $(UPGRADE) --python-platform x86_64-manylinux_2_28 - -o pipeline/uv.txt
	echo "pip-audit==2.10.1" | $(LOCK) $(UPGRADE) --python-platform x86_64-manylinux_2_28 - -o pipeline/audit-tools.txt

lint: setup ## ruff, cfn-lint, sam validate --lint, checkov, workflow schema and audit
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run cfn-lint template.yaml
	sam validate --lint --template template.yaml
	checkov --quiet --compact --skip-download --framework cloudformation --file template.yaml --config-file template.checkov.yaml
	$(UV) run check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yaml
	$(UV) run check-jsonschema --builtin-schema vendor.dependabot .github/dependabot.yml
	$(UV) run zizmor --offline .github/workflows
	$(UV) run cfn-lint pipeline/bootstrap.yaml
	checkov --quiet --compact --skip-download --framework cloudformation --file pipeline/bootstrap.yaml

unit: setup ## unit tests (moto in-process, no network; one worker per core)
	$(UV) run pytest -n auto --dist worksteal tests/unit

# The local stack runs the built functions and layer (sam build), as Lambda would: nothing from
# the test environment is on their path.
integration: setup build ## integration tests: the local stack (FANOUT=lambda|pipe|router|pipe-topic|pipe-sfn; TLS=1: over HTTPS), or a deployed one (AWS_SAM_STACK_NAME)
	FANOUT=$(FANOUT) LOCAL_STACK_TLS=$(if $(filter 1,$(TLS)),1,0) $(UV) run pytest tests/integration

# The suites at once, each on a local stack of its own (its own port and function workers; the
# stacks share only .emulator/logs, which each appends to): the docs test once, in a session of
# its own against the default (lambda) stack, the rest once per fan-out mode. They wait ~90% of
# the time (visibility timeouts, retries), so together they take little more than the longest.
INTEGRATION_SUITES := docs $(FANOUT_MODES)
integration-modes: setup build ## the integration suite in every fan-out mode at once (FANOUT_MODES), the docs test once: what make test runs
	@if [ -n "$${AWS_SAM_STACK_NAME:-}" ]; then \
		echo "== integration tests against $$AWS_SAM_STACK_NAME (deployed: its own fan-out mode)"; \
		$(UV) run pytest tests/integration; \
		exit 0; \
	fi; \
	$(MAKE) --no-print-directory -o setup -o build -k -j$(words $(INTEGRATION_SUITES)) \
		--output-sync=target $(addprefix integration-suite-,$(INTEGRATION_SUITES))

integration-suite-docs:
	FANOUT=lambda $(UV) run pytest tests/integration/test_docs.py
# Mode lambda's suite runs on a stack served over TLS (tests/integration/conftest.py): the flow,
# ops and the functions over HTTPS, trusting the stack's own authority. The tests marked
# fan_out_independent (ingest, rejections, the Notifier's queue: nothing the fan-out decides) run
# in the first mode only; the other modes run the rest.
TLS_MODES := lambda
integration-suite-%:
	FANOUT=$* LOCAL_STACK_TLS=$(if $(filter $*,$(TLS_MODES)),1,0) $(UV) run pytest tests/integration --ignore=tests/integration/test_docs.py \
		$(if $(filter $*,$(firstword $(FANOUT_MODES))),,-m "not fan_out_independent")

sam-local: setup build ## the real `sam local invoke` / `start-lambda` on every function and sample event
	$(UV) run pytest tests/samlocal

# The deploy rehearsal (docs/deploy.md, "Rehearse the deploy locally"): the pipeline's own `sam
# package` / `sam deploy --config-env test|prod` / `sam delete` commands, by the pinned SAM CLI,
# against an empty local stack (`up --no-deploy`) through AWS_ENDPOINT_URL.
.PHONY: deploy-rehearsal
deploy-rehearsal: setup build ## sam deploy (test; prod refused, then with step 3's values; an update) and sam delete, against an empty local stack
	$(UV) run pytest tests/deploy

# `make test`'s phases at once, each one's wall and CPU in bench/out/test-phases.jsonl (P8 of
# `make bench` reports them): lint and the unit tests (CPU-bound, niced: the local stacks'
# functions have 2 s timeouts and must get a core when they need one) beside the integration
# suites and the deploy rehearsal, which mostly wait (the rehearsal's poison test alone waits
# 5 x 60 s); sam-local (Docker, qemu) once lint is done, the chaos runs once the integration
# suites are. lint stays niced on purpose: un-niced it ended at 148 s, sam-local's containers
# (qemu's CPU, which no phase counts: dockerd starts them) overlapped the integration suites, and
# make test took 756 s against 667 s. setup and build run once, before them.
PHASE := $(UV) run --quiet python -m bench.phases
# Contacts of each of make test's chaos runs (`make chaos` alone: CHAOS_CONTACTS). Five runs of
# 500 at once spent 565 s of the two cores' CPU and put `make test` at 801 s; 300 each keeps
# every fault, the duplicates and every operator command (harness/chaos.py: mostly waits, which
# fewer contacts would not shorten) in every mode; make test with them is not measured yet
# (docs/performance.md, "The chaos run's operator").
TEST_CHAOS_CONTACTS ?= 300
test: setup build ## every check and test: lint, unit, integration and chaos in every fan-out mode, sam-local, the deploy rehearsal (what .ci/run calls)
	$(PHASE) --total test -- $(MAKE) --no-print-directory -o setup -o build -k -j6 \
		--output-sync=target CHAOS_CONTACTS=$(TEST_CHAOS_CONTACTS) \
		test-phase-lint test-phase-unit test-phase-integration-modes \
		test-phase-sam-local test-phase-deploy-rehearsal test-phase-chaos-modes \
		test-phase-behaviour-local

test-phase-sam-local: test-phase-lint
test-phase-chaos-modes: test-phase-integration-modes
test-phase-lint test-phase-unit: test-phase-%:
	$(PHASE) $* -- nice -n 10 $(MAKE) --no-print-directory -o setup -o build $*
test-phase-integration-modes test-phase-deploy-rehearsal test-phase-chaos-modes test-phase-behaviour-local: test-phase-%:
	$(PHASE) $* -- $(MAKE) --no-print-directory -o setup -o build $*
# Its functions run in Docker's containers, which no phase waits for: their CPU counted apart.
test-phase-sam-local:
	$(PHASE) --containers sam-local -- $(MAKE) --no-print-directory -o setup -o build sam-local

# Without SAM's noise (it has no option for it): the functions have no requirements.txt on
# purpose, their dependencies are the layer's (an empty one trades each warning for a pip run and
# two other lines per function, every build); and the pipeline deploys, not `sam deploy --guided`.
# Built again only when what it builds changed (a file of BUILD_SOURCES newer than the last
# build), so `make up` or `make run` beside a running stack no longer rewrites .aws-sam/build
# under it; one build at a time (two at once failed inside sam build: [Errno 17] File exists):
# the second waits, then finds the first's build up to date. A deleted source is not seen: make
# clean. tests/unit/test_build.py runs two at once.
BUILT := .aws-sam/build/template.yaml
BUILD_SOURCES := template.yaml samconfig.toml functions layers
build: setup ## sam build (python3.13, arm64 layer, no container), when template.yaml, samconfig.toml, functions/ or layers/ changed since the last
	@mkdir -p .aws-sam
	@exec 9> .aws-sam/build.lock; \
	if ! flock -n 9; then echo "another build is running (.aws-sam/build): waiting for it"; flock 9; fi; \
	newer=$$(find $(BUILD_SOURCES) -type f -newer $(BUILT) -not -path '*/__pycache__/*' -print -quit 2>/dev/null || echo none); \
	if [ -f $(BUILT) ] && [ -z "$$newer" ]; then echo "sam build: up to date"; exit 0; fi; \
	echo "sam build"; \
	sam build 2>&1 | sed -e '/^requirements.txt file not found. Continuing the build without dependencies.$$/d' \
		-e '/^Commands you can use next$$/,$$d'

up: setup build ## the local stack on 127.0.0.1:4566 (EMULATOR_PORT overrides; FANOUT=lambda|pipe|router|pipe-topic|pipe-sfn; TLS=1: HTTPS too)
	$(UV) run python -m emulator up --parameter-overrides FanOut=$(FANOUT) $(if $(filter 1,$(TLS)),--tls)

run: setup build ## demo: local stack, demo files in, summary out (FANOUT=lambda|pipe|router|pipe-topic|pipe-sfn)
	$(UV) run python -m harness.demo --fan-out $(FANOUT)

CHAOS_CONTACTS ?= 10000
# Each chaos run keeps its stack's logs (DEMO_LOGS) for the trace checker (harness.trace: every
# record's transitions against docs/design.md's), which fails the run on a forbidden one; a run
# that fails leaves them where it says (a failure whose logs were gone could not be read).
CHAOS_RUN = logs=$$(mktemp -d) && status=0 && \
	{ DEMO_LOGS=$$logs $(UV) run python -m harness.demo --chaos --contacts $(CHAOS_CONTACTS) --fan-out $(1) || status=$$?; } && \
	{ $(UV) run python -m harness.trace $$logs || status=$$((status ? status : 1)); } ; \
	if [ $$status -eq 0 ]; then rm -rf $$logs; else echo "chaos $(1): the functions' logs are in $$logs"; fi; \
	exit $$status
chaos: setup build ## exactly-once under duplicates, reorders, crashes, throttles and an operator's recovery, each record's trace checked (CHAOS_CONTACTS=10000, FANOUT=lambda|pipe|router|pipe-topic|pipe-sfn)
	$(call CHAOS_RUN,$(FANOUT))

# Each mode on a local stack of its own, as many at once as the machine has cores (CHAOS_JOBS).
# Unlike the integration suites, a chaos run keeps its stack busy: five at once on two cores
# pushed invocations past their 2 s timeouts, retried and started cold (measured on a slow 2-core
# machine, 300 contacts each: -j5 375 s wall, 707 s CPU and an ingest message dead-lettered after
# five timeouts; -j2 337 s, 418 s, every verdict clean).
CHAOS_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
chaos-modes: setup build ## make chaos in every fan-out mode (FANOUT_MODES; CHAOS_CONTACTS), CHAOS_JOBS (the cores) at a time
	$(MAKE) --no-print-directory -o setup -o build -k -j$(CHAOS_JOBS) \
		--output-sync=target $(addprefix chaos-mode-,$(FANOUT_MODES))

chaos-mode-%:
	$(call CHAOS_RUN,$*)

# Not in `make test`: the suite is another project's (CI reaches package registries only), so
# give a checkout of nubo-db/dynamodb-conformance; node and npm from the machine's packages.
dynamodb-conformance: setup build ## DynamoDB's conformance suite against the local stack, failing below the recorded count (CONFORMANCE_DIR=checkout; RECORD=1 records a higher one)
	@test -n "$(CONFORMANCE_DIR)" || { echo "CONFORMANCE_DIR=<a checkout of nubo-db/dynamodb-conformance>"; exit 2; }
	$(UV) run python -m tests.conformance.dynamodb --checkout "$(CONFORMANCE_DIR)" $(if $(filter 1,$(RECORD)),--record-new)

# The deep search (issue 42, item 5; docs/performance.md "The deep search": what it covers, how
# long it takes): the model tests with DEEP_MODEL_EXAMPLES examples per fan-out mode, then chaos
# at DEEP_CHAOS_CONTACTS in every mode, one mode at a time (two 10,000-contact stacks on two cores
# push invocations past their 2 s timeouts), each through chaos-mode-% as make test runs it.
DEEP_MODEL_EXAMPLES ?= 200
DEEP_CHAOS_CONTACTS ?= 10000
DEEP_CHAOS_JOBS ?= 1
.PHONY: deep-search
deep-search: setup build ## hours: the model tests with 200 examples per mode, chaos at 10,000 contacts in every mode (DEEP_MODEL_EXAMPLES, DEEP_CHAOS_CONTACTS, DEEP_CHAOS_JOBS)
	MODEL_EXAMPLES=$(DEEP_MODEL_EXAMPLES) $(UV) run pytest -n auto --dist worksteal tests/unit/model/test_model.py
	$(MAKE) --no-print-directory -o setup -o build -k CHAOS_CONTACTS=$(DEEP_CHAOS_CONTACTS) \
		CHAOS_JOBS=$(DEEP_CHAOS_JOBS) chaos-modes

# Apart from `make locks`: nothing ships or deploys with these, so the weekly audit of the
# shipped locks (.github/workflows/locks.yaml) leaves them out; a new rival version is a new pin.
behaviour-locks: ## rewrite the rivals' hash locks behaviour/targets/<name>.txt from MINISTACK_VERSION and MOTO_RIVAL_VERSION
	echo "ministack==$(MINISTACK_VERSION)" | $(BEHAVIOUR_LOCK) - -o behaviour/targets/ministack.txt
	echo "moto[server]==$(MOTO_RIVAL_VERSION)" | $(BEHAVIOUR_LOCK) - -o behaviour/targets/moto.txt

behaviour-tools: ## the behaviour suite's rivals (ministack, moto's server) into .tools/behaviour/<name>, from the hash locks behaviour/targets/<name>.txt
	@test -n "$(PY313)" || { echo "Python 3.13 not found (pyenv or python3.13 on PATH)"; exit 1; }
	for rival in $(BEHAVIOUR_RIVALS); do \
		$(UV) venv --quiet --allow-existing --python $(PY313) .tools/behaviour/$$rival; \
		$(UV) pip install --quiet --require-hashes --python .tools/behaviour/$$rival/bin/python -r behaviour/targets/$$rival.txt; \
	done

# Every case against this stack and each rival, one target at a time; the table into
# docs/local-stack.md ("Behaviour suite"). Fails when this stack fails a case.
behaviour: setup behaviour-tools ## the behaviour suite against this stack, ministack and moto's server; the table into docs/local-stack.md
	$(UV) run python -m behaviour --publish

# This stack's column alone, as make test runs it (tests/behaviour: known gaps are strict xfails).
behaviour-local: setup ## the behaviour suite against this stack only (pytest)
	$(UV) run pytest tests/behaviour

iam-report: setup ## grants no call used and calls denied, from the last integration run and demo
	$(UV) run python -m emulator iam-report

bench: setup build ## performance figures against their budgets -> bench/results.json (P5 in every fan-out mode)
	BENCH_P5_MODES="$(FANOUT_MODES)" $(UV) run python -m bench

# Local state and caches only. Not .venv or .tools: they are installs, not state (make setup
# would download them again); remove them by hand to start from scratch.
clean: ## remove local stack state and logs, sam build output, bench output and caches
	rm -rf .emulator .samlocal .aws-sam bench/out .pytest_cache .ruff_cache .hypothesis
	find . \( -path ./.venv -o -path ./.tools -o -path ./.git \) -prune -o \
		-type d -name __pycache__ -prune -exec rm -rf {} +
