# kreplica: `make demo` runs the main job, `make test` runs every check. Both set up .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JAVA_HINT := install a Java 17 JDK, e.g. 'apt-get install -y openjdk-17-jdk-headless'

.PHONY: venv java demo test lint typecheck unit check-ci check-full clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# TLC and Spark need Java 17, and `kreplica conform` compiles its trace reader with javac:
# install Debian's JDK when we can (root with apt-get), else say how in one line.
java:
	@{ command -v java && command -v javac; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless) >/dev/null \
	      || { echo "java/javac not found and could not be installed: $(JAVA_HINT)" >&2; exit 1; }; \
	  else echo "java/javac not found: $(JAVA_HINT)" >&2; exit 1; fi; }

demo: venv java
	$(BIN)/kreplica check --suite ci --jobs 2

lint: venv
	$(BIN)/ruff check impl conformance tests src/kreplica/__init__.py
	$(BIN)/ruff format --check impl conformance tests src/kreplica/__init__.py

typecheck: venv
	MYPYPATH=src $(BIN)/mypy -p kreplica

check-ci: venv java
	$(BIN)/kreplica check --suite ci --jobs 2

check-full: venv java
	$(BIN)/kreplica check --suite full

unit: venv java
	$(BIN)/pytest -q

test: lint typecheck check-ci unit

clean:
	rm -rf $(VENV) build .mypy_cache .ruff_cache .pytest_cache .hypothesis out
