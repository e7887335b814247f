"""kreplica.conformance: what holds the implementation (`kreplica.impl`) against the TLA+ spec.

It is split into rooms by concern; each room's `__init__.py` says what it holds and what it may
import. Imports flow one way, down this list, and never up or sideways:

    cli        one module per `kreplica` subcommand: parse, call an engine, render
    bench      the benchmarks' engines (`kreplica bench NAME`)
    demo       the main job (`kreplica demo`): check, fuzz, conform on Spark, draw, one report
    mutation   mutation testing: small edits seeded into impl/, each run through the fuzz and
               conformance campaign, and the kill rate over them
    explain    pictures of traces: a trace as a timeline, one lane per replica, with what to
               highlight, drawn in the terminal (rich), as PNG or SVG (matplotlib) and as an
               HTML page that steps through the run
    coverage   spec coverage: TLC's state graph of a small config (networkx), a corpus's
               states and actions mapped onto it, and the shortest paths to what was missed
    kafka      real Apache Kafka under the model: one fault schedule on a real cluster (ZooKeeper
               and three broker JVMs) and on kreplica's simulator, and their outcomes compared
    symbolic   the implementation's pure decisions held, for every input within bounds, to the
               spec's operators written as z3 formulas (R3, R4, R6, R7, R8, R11, R13, R14, R15)
    fuzz       Hypothesis state machines, the run plan, the settle phase, fuzz targets, the
               corpus writer, random walks
    validate   trace validation with TLC: trace data, batches, Spark and pool runners, results
               (it needs the spec's side only, so a Spark executor loads no simulator)
    replay     a trace's actions, or a saved schedule's steps, driven on the implementation
               and judged; the cluster a trace replays on; schedules saved and minimised
    judges     every check that judges a run: the spec's invariants, Kafka's rules on the
               clock, the client's answers, liveness once a run settles; each watches the
               events the recorder emits and keeps its own books
    bridge     projection, recorder, step coding: a run of the implementation as a trace in
               the spec's vocabulary, the only room below the judges that knows both sides
    tla        TLC and Apalache runners, TLC output, TLA+ values, ITF, model configs, the
               spec's vocabulary: the spec's side, with no knowledge of the implementation
    spark      (a module) what every Spark job shares: the context, kreplica (and what else
               a task imports) shipped to the executors, a failed job in one line, Ctrl-C
    errors     (a module) the exceptions every room raises and the CLI's exit codes

Rule and scenario numbers (R1-R23, S1-S14) in docstrings are explained in docs/kafka-rules.md;
docs/architecture.md draws the rooms and what flows between them.

`ROOMS` below is that graph as data; `tests/test_layout.py` reads every module's imports and
fails on an edge it does not allow, and on an edge no import uses (Python refuses no cycle,
so the test does). A module named in a string (code run as another process) counts as an
import.
"""

ROOMS: dict[str, frozenset[str]] = {
    "cli": frozenset(
        {
            "bench",
            "demo",
            "explain",
            "mutation",
            "coverage",
            "kafka",
            "fuzz",
            "validate",
            "replay",
            "spark",
            "tla",
            "errors",
            "impl",
        }
    ),
    "bench": frozenset({"kafka", "fuzz", "validate", "tla", "errors", "impl"}),
    "demo": frozenset({"explain", "tla", "errors"}),
    "explain": frozenset({"validate", "judges", "bridge", "tla", "errors"}),
    "mutation": frozenset({"tla", "errors", "impl"}),
    "coverage": frozenset({"validate", "spark", "tla", "errors"}),
    "kafka": frozenset({"tla", "errors", "impl"}),
    "symbolic": frozenset({"impl"}),
    "fuzz": frozenset({"replay", "judges", "bridge", "spark", "tla", "errors", "impl"}),
    "validate": frozenset({"spark", "tla", "errors", "impl"}),
    "replay": frozenset({"judges", "bridge", "tla", "errors", "impl"}),
    "judges": frozenset({"bridge", "impl"}),
    "bridge": frozenset({"tla", "errors", "impl"}),
    "tla": frozenset({"errors"}),
    "spark": frozenset({"errors"}),
    "errors": frozenset(),
    "impl": frozenset(),
}
"""Each room of kreplica, and the rooms it may import (`impl` is kreplica.impl, which may import
no other room)."""
