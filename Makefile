# ncreel: `make demo` runs the workflow on the bundled real sample; `make test` runs the
# test suite. Both set up everything they need (Python virtualenv, system tools).
SHELL := /bin/bash
# Empty: .ci/venv.sh takes the first Python >= 3.11 on PATH. make demo PYTHON=/path/to/python3.
PYTHON ?=
VENV ?= .venv
PY := $(VENV)/bin/python
SNAKEMAKE := $(VENV)/bin/snakemake
CORES ?= 2
SAMPLE := resources/A1B_north_america.nc
PYTEST_ARGS ?=
LOCK := envs/lock

.PHONY: demo test durations lint lock upgrade bench bench-cells bench-chunks bench-e2e bench-render bench-scale sysdeps venv clean dag report help profiles status report-screenshot
help:
	@echo "make demo   - run ncreel on the sample (results/demo/)"
	@echo "make test   - run the test suite (TEST_WORKERS parallel workers, default 2 x cores)"
	@echo "make lint   - ruff, snakefmt --check (.smk), snakemake --lint (also a test)"
	@echo "make dag    - results/demo/rulegraph.svg and dag.svg (graphviz)"
	@echo "make report - results/demo/report.html (runs what is missing first)"
	@echo "make status - which shards of RUN (default demo) are done/running/failed/interrupted/to do"
	@echo "make report-screenshot - docs/report-resources.png of the report's resources page"
	@echo "make profiles - link profiles/* into your Snakemake config dir (--profile cheyenne ...)"
	@echo "make bench  - bench-render + bench-cells + bench-chunks + bench-e2e (key=value lines)"
	@echo "make bench-render - frames/s, end-to-end time and peak RSS vs xmovie and FFMpegWriter;"
	@echo "                    overlays vs matplotlib's FuncAnimation"
	@echo "make bench-cells - COPY writer vs pandas and a per-cell loop, a big run, reduce, load and replace"
	@echo "make bench-e2e - whole runs on an ERA5-like 0.25 degree hourly file (movie, chunks, rows)"
	@echo "make bench-chunks - reading an ERA5-like file in day chunks vs per-step chunks"
	@echo "make bench-scale - 10 000-shard dry run, PBS submissions and status calls per poll"
	@echo "make venv   - only the virtualenv .venv/ (ncreel, Snakemake; PYTHON=/path/to/python3)"
	@echo "make lock   - rewrite envs/lock/*.txt after a change of pyproject.toml (keeps versions)"
	@echo "make upgrade - the newest releases pyproject.toml allows into envs/lock/ (then make test)"
	@echo "make sysdeps - the system packages the tests need (apt: ffmpeg, PostgreSQL, graphviz...)"
	@echo "make clean  - remove results/, logs/ and .snakemake/ (keeps .venv/)"
	@echo "make docs   - the documentation site into site/ (mkdocs build --strict)"

# The virtualenv, without root: PYTHON (default: the first Python >= 3.11 on PATH; on a
# cluster `module load conda` provides one) and pip from the package index where the system
# Python lacks ensurepip (Debian's python3.X-venv). See .ci/venv.sh and docs/install.md.
$(VENV)/.created:
	@if [ -x $(PY) ] && $(PY) -m pip --version >/dev/null 2>&1; then :; else \
	  VENV="$(VENV)" PYTHON="$(PYTHON)" bash .ci/venv.sh; fi
	@touch $@

# Two layers, each its own stamp and lock file: what the workflow needs (make demo, dag,
# report, status: envs/lock/workflow.txt), + test, lint, docs and benchmark tools (make
# test, lint, docs, bench*: envs/lock/test.txt). Exactly the locked versions, hash-checked;
# ncreel itself is installed editable without dependencies (they are all in the lock).
# The PBS Pro executor plugin is its own distribution (workflow/executor-plugin-pbs-pro),
# installed next to ncreel, which uses it on login nodes. Not editable: Snakemake finds
# executor plugins by module name on sys.path, which an editable install's import hook
# hides ("invalid choice: 'pbs-pro'"); a change to its files reinstalls it. The last line
# checks that Snakemake sees it.
PLUGIN_PBS := ./workflow/executor-plugin-pbs-pro
PLUGIN_PBS_FILES := $(PLUGIN_PBS)/pyproject.toml $(wildcard $(PLUGIN_PBS)/snakemake_executor_plugin_pbs_pro/*.py)

$(VENV)/.installed: pyproject.toml $(LOCK)/workflow.txt $(PLUGIN_PBS_FILES) | $(VENV)/.created
	@echo "ncreel: installing the locked versions ($(LOCK)/workflow.txt) of what the workflow needs into $(VENV) (1-3 min)"
	$(PY) -m pip install --progress-bar off --require-hashes --no-deps -r $(LOCK)/workflow.txt
	$(PY) -m pip install --progress-bar off --no-deps --force-reinstall $(PLUGIN_PBS)
	$(PY) -m pip install --progress-bar off --no-deps -e .
	$(PY) -c "from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry as R; \
	  assert R().is_installed('pbs-pro'), 'Snakemake does not find the pbs-pro executor plugin'"
	touch $@
venv: $(VENV)/.installed

$(VENV)/.test: $(VENV)/.installed $(LOCK)/test.txt
	@echo "ncreel: installing the locked test, lint and docs tools ($(LOCK)/test.txt) into $(VENV)"
	$(PY) -m pip install --progress-bar off --require-hashes --no-deps -r $(LOCK)/test.txt
	touch $@

# The locks: envs/lock/*.txt (exact versions with hashes, written by uv from pyproject.toml;
# .ci/lock.py says how) and the same versions in envs/*.yaml. `make lock` after a change of
# pyproject.toml keeps every locked version it can; `make upgrade` takes the newest releases
# pyproject.toml allows. Either is accepted by `make test` passing on the new lock.
lock: $(VENV)/.test
	$(PY) .ci/lock.py write
upgrade: $(VENV)/.test
	$(PY) .ci/lock.py write --upgrade

# System tools: ffmpeg/ffprobe (tests; the workflow itself falls back to imageio-ffmpeg),
# graphviz (DAG pictures), PostgreSQL server and psql, zstd (tests). Installed with apt-get
# when missing as root (or with password-less sudo); otherwise each missing one is named with
# what it is for: the tests that need it are skipped with that reason.
sysdeps:
	@bash .ci/sysdeps.sh test

$(SAMPLE): | $(VENV)/.installed
	@echo "ncreel: copying the sample input to $@"
	$(PY) -m ncreel.sample $@

demo: $(VENV)/.installed $(SAMPLE)
	$(SNAKEMAKE) --cores $(CORES)
	@echo "outputs: results/demo/movie.mp4 results/demo/cells.copy results/demo/cells.sql"

# The suite on parallel workers (pytest-xdist): twice the cores, since many tests wait on a
# scheduler's job or a subprocess rather than use a core; --dist loadgroup keeps tests that
# share a workflow run (or a scheduler's state) on one worker, and the longest go out
# first (tests/conftest.py). TEST_WORKERS=0: one test at a time in this process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) * 2 )))
test: $(VENV)/.test $(SAMPLE) sysdeps
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# tests/durations.json (what make test schedules by) measured again by a whole run.
durations: $(VENV)/.test $(SAMPLE) sysdeps
	NCREEL_DURATIONS_OUT=tests/durations.json $(PY) -m pytest -n $(TEST_WORKERS) \
	  --dist loadgroup $(PYTEST_ARGS)

lint: $(VENV)/.test
	$(VENV)/bin/ruff check workflow tests bench .ci
	$(PY) tests/smk_lint.py
	$(VENV)/bin/snakefmt --check Snakefile workflow/Snakefile workflow/rules
	$(SNAKEMAKE) --lint

# Not a timed test: several minutes on 2 cores. Prints key=value lines at the end.
bench-render: $(VENV)/.test sysdeps
	$(PY) bench/render_bench.py
	$(PY) bench/overlay_bench.py --grid 0.25 --width 1920 --height 1080 --dpi 200

# The graphs are written as Graphviz text first; without graphviz (and no root to install
# it) make dag says so and keeps the .dot files.
dag: $(VENV)/.installed $(SAMPLE)
	@mkdir -p results/demo
	$(SNAKEMAKE) --rulegraph > results/demo/rulegraph.dot
	$(SNAKEMAKE) --dag > results/demo/dag.dot
	@bash .ci/sysdeps.sh dag
	@if command -v dot >/dev/null; then \
	  dot -Tsvg results/demo/rulegraph.dot > results/demo/rulegraph.svg && \
	  dot -Tsvg results/demo/dag.dot > results/demo/dag.svg && \
	  echo "outputs: results/demo/rulegraph.svg results/demo/dag.svg"; \
	else \
	  echo "ncreel: no SVG pictures without graphviz; wrote results/demo/rulegraph.dot and" \
	    "dag.dot (Graphviz text): render them where graphviz is (dot -Tsvg X.dot > X.svg)."; \
	fi

# The resources page and contact sheet are outputs of rules (resources_report,
# contact_sheet): build what is missing, then write the report.
report: $(VENV)/.installed $(SAMPLE)
	$(SNAKEMAKE) --cores $(CORES) results/demo/report/resources.html results/demo/report/plan.html
	@# --configfile: the demo's report (without one, --report reports the last run made here)
	$(SNAKEMAKE) --configfile config/config.yaml --report results/demo/report.html

# Reads files only (and squeue/qstat for jobs a scheduler ran); starts nothing.
RUN ?= demo
status:
	@PYTHONPATH=workflow $(PY) -m ncreel.cluster.runstatus --run $(RUN)

# Headless Chromium (Debian: apt-get install -y chromium) on the report's resources page.
report-screenshot: report
	PYTHONPATH=workflow $(PY) -m ncreel.report.screenshot results/demo/report.html docs/report-resources.png

clean:
	rm -rf results logs .snakemake

# The benchmarks; each ends with key=value lines (see docs/performance.md).
bench: bench-render bench-cells bench-chunks bench-e2e

# Whole-workflow benchmark on an ERA5-like 0.25 degree hourly file (bench/era5like.py):
# a 240-step movie-only run against ffmpeg's re-encode of it, day against per-step chunks,
# a 48-step run with both outputs and the row writer against polars' write_csv.
# BENCH_E2E_ARGS="--smoke" runs it on a tiny grid (tests/test_bench_e2e_smoke.py).
BENCH_E2E_ARGS ?=
bench-e2e: $(VENV)/.test sysdeps
	$(PY) bench/e2e_bench.py $(BENCH_E2E_ARGS)

# Reading compressed chunks along time: an ERA5-like file (0.25 degrees, zlib) in day
# chunks against per-step chunks, through the frames, rows and statistics passes, with
# and without the chunk held between reads. "--smoke" runs at tiny sizes
# (tests/test_bench_chunks_smoke.py).
BENCH_CHUNKS_ARGS ?=
bench-chunks: $(VENV)/.test
	$(PY) bench/chunks_bench.py $(BENCH_CHUNKS_ARGS)

# Per-cell table benchmark: COPY writer vs pandas vs per-cell loop, the
# 1 000 000-cell x 100-step workflow run against declared mem_mb, reduce vs cat, load (1 and
# 2 connections) vs psql \copy, replacing a run's partition beside a reader of another run.
# Ends with key=value lines. BENCH_CELLS_ARGS="--big 0" skips the big run; "--replace-rows N"
# sizes the replaced run; "--smoke" runs every phase at tiny sizes
# (tests/test_bench_cells_smoke.py).
BENCH_CELLS_ARGS ?=
bench-cells: $(VENV)/.test sysdeps
	$(PY) bench/cells_bench.py $(BENCH_CELLS_ARGS)

# One-time step so that `snakemake --profile cheyenne` (slurm, derecho, casper,
# compute-node) works as typed from the repository root: symlink each profile into the
# user's Snakemake config directory, which Snakemake searches for named profiles
# ($XDG_CONFIG_HOME/snakemake, default ~/.config/snakemake). Existing entries that are not
# our links are left alone. See docs/clusters/index.md.
PROFILE_DIR ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
profiles:
	@mkdir -p "$(PROFILE_DIR)"
	@for p in profiles/*/; do \
	  name=$$(basename "$$p"); [ "$$name" = default ] && continue; \
	  dest="$(PROFILE_DIR)/$$name"; \
	  if [ -e "$$dest" ] && [ ! -L "$$dest" ]; then echo "skip $$dest (exists, not a link)"; continue; fi; \
	  ln -sfn "$(CURDIR)/profiles/$$name" "$$dest" && echo "$$dest -> $(CURDIR)/profiles/$$name"; \
	done

# Scale benchmark: `snakemake -n` on 1 000 and 10 000 shards, qsub calls for
# 1 000 ready shards (recording qsub/qstat stand-ins); BENCH_SCALE_ARGS="--pbs-shards 200"
# adds a real 200-shard array run on the local PBS server. Ends with key=value lines.
BENCH_SCALE_ARGS ?=
bench-scale: $(VENV)/.test
	$(PY) bench/scale_bench.py $(BENCH_SCALE_ARGS)

# The documentation site (docs/, mkdocs.yml) into site/. The configuration reference is
# generated from the schema first; --strict makes every warning (a broken link) an error.
.PHONY: docs
docs: $(VENV)/.test
	PYTHONPATH=workflow $(PY) -m ncreel.config.docgen
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
