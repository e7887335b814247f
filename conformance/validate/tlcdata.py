"""Trace data for TLC without TLA+ text: a compact binary file and a Java override that reads it.

TLC's parser is slow on big generated modules (about 0.3 MB/s), so instead of writing a batch of
traces as the TLA+ module `TraceData.tla`, we write it as a small binary file and let TLC
take `TraceLog` from `conformance/validate/java/TraceData.java`: TLC replaces the definitions
of a module by the public static methods of a class named after the module, found beside the
spec or on the classpath. The module itself must still exist, so a stub (`STUB_MODULE`) goes
with the data.

The value TLC gets is exactly the value of the TLA+ rendering (`tracecheck.render`, through
`format_value`): integers, strings, booleans, tuples, sets, records, functions; an empty record
or function is the empty tuple `<<>>`, as it is rendered. Model values have no encoding (the
rendering would name an undefined identifier). The format is described in the Java source.

Two ways to run TLC with the reader (`build_reader` compiles it once into a cache directory):

* beside the spec: `install(workdir, traces)` writes `TraceData.tla` (the stub),
  `TraceData.kdat` (the data) and copies the compiled classes into the spec's directory;
  TLC finds the class there and the class finds the data beside itself. The TLC command
  does not change.
* on the classpath: `java -cp tla2tools.jar:<reader dir> -Dkreplica.tracedata=<file> tlc2.TLC ...`
  (`jvm_args(reader_dir, data_file, jar)` gives these arguments), with the stub module
  beside the spec.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from kreplica.conformance.errors import CheckerError, KreplicaError
from kreplica.conformance.tla.itf import ItfTrace, decode_trace
from kreplica.conformance.tla.tlavalue import Map, ModelValue, Record, Value, is_identifier
from kreplica.conformance.tla.tlc import find_tla2tools
from kreplica.conformance.tla.vocabulary import ACTION_ARGS, VARIABLES
from kreplica.conformance.validate.shapes import shape_table
from kreplica.conformance.validate.trace_events import hidden, trace_events

MODULE = "TraceData"
AGREEMENT_MODULE = "TraceAgreement"
"""spec/TraceAgreement.tla: its Java override is compiled and shipped with the reader."""
DATA_FILE = "TraceData.kdat"
PROPERTY = "kreplica.tracedata"
JAVA_SOURCES = tuple(
    Path(__file__).resolve().parent / "java" / name
    for name in (
        f"{MODULE}.java",
        f"{MODULE}Json.java",
        "TraceDataPrefixes.java",
        f"{AGREEMENT_MODULE}.java",
    )
)
"""The reader's sources: the override, its ITF JSON reader, the sharing of the traces'
prefixes, and the override of the trace spec's AllAgree (spec/TraceAgreement.tla)."""
MAGIC = b"KRTD\x01"
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
JAVAC_HINT = "install a JDK (e.g. apt-get install openjdk-17-jdk-headless) or pass javac="

_is_field = functools.lru_cache(maxsize=4096)(is_identifier)
"""`is_identifier`, remembered (the same few field names recur in every event)."""

STUB_MODULE = (
    f"---- MODULE {MODULE} ----\n"
    "(* TraceLog is read from a data file by the Java override TraceData.class. *)\n"
    "EXTENDS Integers, Sequences\n\nTraceLog == <<>>\n====\n"
)
"""The module TLC parses; the override replaces its definition of TraceLog."""


class TlcDataError(KreplicaError, ValueError):
    """A value that has no encoding, or bytes that are not a trace data file."""


# ---------------------------------------------------------------- encoding


class _Encoder:
    """Values to bytes, with a table of the strings they use (strings and field names)."""

    def __init__(self) -> None:
        """Start with an empty body and string table."""
        self.body = bytearray()
        self.strings: dict[str, int] = {}

    def string(self, text: str) -> None:
        """Append the index of `text` in the string table."""
        index = self.strings.get(text)
        if index is None:
            index = self.strings[text] = len(self.strings)
        _varint(self.body, index)

    def value(self, value: Value) -> None:
        """Append one value."""
        out = self.body
        if isinstance(value, bool):
            out += b"t" if value else b"f"
        elif isinstance(value, int):
            if not INT_MIN <= value <= INT_MAX:
                raise TlcDataError(f"integer {value} is out of TLC's range (32 bits)")
            out += b"i"
            _varint(out, (value << 1) ^ (value >> 63))
        elif isinstance(value, str):
            out += b"s"
            self.string(value)
        elif isinstance(value, tuple):
            out += b"T"
            _varint(out, len(value))
            for item in value:
                self.value(item)
        elif isinstance(value, frozenset):
            out += b"S"
            _varint(out, len(value))
            for item in value:
                self.value(item)
        elif isinstance(value, ModelValue):
            raise TlcDataError(f"model value {value.name} cannot be trace data")
        else:
            self.mapping(value)

    def mapping(self, value: Record | Map) -> None:
        """Append a record, a function, or `<<>>` when empty (as `format_value` renders them)."""
        out = self.body
        if not value:
            out += b"T\x00"
            return
        if all(isinstance(k, str) and _is_field(k) for k in value):
            out += b"R"
            _varint(out, len(value))
            for key, item in value.items():
                assert isinstance(key, str)
                self.string(key)
                self.value(item)
            return
        out += b"F"
        _varint(out, len(value))
        for key, item in value.items():
            self.value(key)
            self.value(item)

    def finish(self) -> bytes:
        """The whole file: magic, string table, then the body."""
        head = bytearray(MAGIC)
        _varint(head, len(self.strings))
        for text in self.strings:
            raw = text.encode("utf-8")
            _varint(head, len(raw))
            head += raw
        return bytes(head + self.body)


def _varint(out: bytearray, n: int) -> None:
    """Append `n` (>= 0) as an unsigned LEB128 varint."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode_value(value: Value) -> bytes:
    """A data file holding `value` (TlcDataError if it has no encoding)."""
    enc = _Encoder()
    enc.value(value)
    return enc.finish()


# ---------------------------------------------------------------- decoding (for tests, tools)


class _Decoder:
    """Bytes to values; TlcDataError on anything malformed."""

    def __init__(self, data: bytes) -> None:
        """Check the magic and read the string table."""
        self.data = data
        self.pos = 0
        if not data.startswith(MAGIC):
            raise TlcDataError("not a kreplica trace data file (version 1)")
        self.pos = len(MAGIC)
        self.strings: list[str] = self.table()

    def table(self) -> list[str]:
        """A string table: a count, then each string's length and UTF-8 bytes."""
        strings = []
        for _ in range(self.count()):
            size = self.count()
            raw = self.take(size)
            try:
                strings.append(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise TlcDataError(f"bad UTF-8 in the string table: {err}") from err
        return strings

    def take(self, size: int) -> bytes:
        """The next `size` bytes."""
        if len(self.data) - self.pos < size:
            raise TlcDataError(f"truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def count(self) -> int:
        """An unsigned varint."""
        result, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 63:
                raise TlcDataError(f"varint too long at byte {self.pos}")

    def string(self) -> str:
        """A string by its index in the table."""
        index = self.count()
        if index >= len(self.strings):
            raise TlcDataError(f"string index {index} out of range")
        return self.strings[index]

    def value(self) -> Value:
        """One value."""
        at = self.pos
        tag = self.take(1)
        if tag == b"i":
            z = self.count()
            return (z >> 1) ^ -(z & 1)
        if tag == b"s":
            return self.string()
        if tag in (b"t", b"f"):
            return tag == b"t"
        if tag == b"T":
            return tuple(self.value() for _ in range(self.count()))
        if tag == b"S":
            return frozenset(self.value() for _ in range(self.count()))
        if tag == b"R":
            return Record([(self.string(), self.value()) for _ in range(self.count())])
        if tag == b"F":
            return Map([(self.value(), self.value()) for _ in range(self.count())])
        if tag == b"J":
            return self.json_trace()
        raise TlcDataError(f"unknown tag {tag!r} at byte {at}")

    def skip_vocabulary(self) -> None:
        """Pass over the vocabulary ('V'), if there is one."""
        if self.data[self.pos : self.pos + 1] != b"V":
            return
        self.pos += 1
        for _ in range(self.count()):
            self.take(self.count())
        for _ in range(self.count()):
            self.take(self.count())
            for _ in range(self.count()):
                self.take(self.count())
        if self.data[self.pos : self.pos + 1] == b"Y":  # the shapes
            self.pos += 1
            for _ in range(2 * self.count()):
                self.take(self.count())

    def json_trace(self) -> Value:
        """A trace as ITF JSON text ('J'), as `trace_value` gives it (the Java reader may keep
        more variables in an event's `v`: those whose JSON text, not value, changed)."""
        raw = self.take(self.count())
        try:
            value = trace_value(decode_trace(json.loads(raw)))
            return _Decoder(encode_value(value)).value()  # in the form TLC holds it
        except (ValueError, KreplicaError) as err:
            raise TlcDataError(f"bad JSON trace: {err}") from err


def decode_value(data: bytes) -> Value:
    """The value of a data file, as the Java reader reads it (TlcDataError if malformed)."""
    dec = _Decoder(data)
    dec.skip_vocabulary()
    value = dec.value()
    if dec.pos != len(data):
        raise TlcDataError(f"{len(data) - dec.pos} bytes after the value")
    return value


# ---------------------------------------------------------------- traces


def _fields(values: Mapping[str, Value]) -> Value:
    """A record of the given fields, or `<<>>` when there are none (as `tracecheck` renders)."""
    return Record(values) if values else ()


def trace_value(trace: ItfTrace) -> Value:
    """One trace as `tracecheck.render` writes it: [hidden, events], events keep what changed."""
    events: list[Value] = []
    for event in trace_events(trace):
        fields: list[tuple[str, Value]] = [
            ("e", event.action),
            ("a", _fields(event.args)),
            ("v", _fields(event.changed)),
        ]
        if event.missing:
            fields.append(("o", frozenset(event.missing)))
        events.append(Record(fields))
    return Record([("hidden", frozenset(hidden(trace))), ("events", tuple(events))])


def encode_traces(traces: Sequence[ItfTrace]) -> bytes:
    """A data file holding TraceLog for `traces`: the tuple of their `trace_value`s."""
    enc = _Encoder()
    out = enc.body
    out += b"T"
    _varint(out, len(traces))
    for trace in traces:
        enc.value(trace_value(trace))
    return enc.finish()


# ---------------------------------------------------------------- traces as JSON


def json_blob(text: str) -> bytes:
    """One trace as its ITF JSON text ('J'), for the Java reader to decode: the fast path, as
    Python's JSON decoding costs more than TLC's checking."""
    raw = text.encode("utf-8")
    blob = bytearray(b"J")
    _varint(blob, len(raw))
    return bytes(blob) + raw


def _vocabulary(shapes: bool) -> bytes:
    """The spec's variables and actions ('V') and their shapes ('Y', `shapes.shape_table`),
    which JSON traces are held to."""
    out = bytearray(b"V")

    def put(text: str) -> None:
        raw = text.encode("utf-8")
        _varint(out, len(raw))
        out.extend(raw)

    _varint(out, len(VARIABLES))
    for name in VARIABLES:
        put(name)
    _varint(out, len(ACTION_ARGS))
    for action, args in ACTION_ARGS.items():
        put(action)
        _varint(out, len(args))
        for arg in sorted(args):
            put(arg)
    if not shapes:
        return bytes(out)
    table = shape_table()
    out += b"Y"
    _varint(out, len(table))
    for key, shape in table:
        put(key)
        put(shape)
    return bytes(out)


def join_traces(blobs: Sequence[bytes], shapes: bool = False) -> bytes:
    """A data file whose TraceLog is the tuple of the traces `json_blob` encoded, with the
    vocabulary they are held to, and with `shapes` the shapes of their values too (the
    checker's batches: `tracecheck.write_batch`)."""
    head = bytearray(MAGIC)
    _varint(head, 0)
    head += _vocabulary(shapes)
    head += b"T"
    _varint(head, len(blobs))
    return bytes(head) + b"".join(blobs)


def install_blobs(
    workdir: Path, blobs: Sequence[bytes], reader_dir: Path, shapes: bool = False
) -> Path:
    """`install`, for traces already encoded by `encode_json_trace`."""
    (workdir / f"{MODULE}.tla").write_text(STUB_MODULE, encoding="utf-8")
    data = workdir / DATA_FILE
    data.write_bytes(join_traces(blobs, shapes))
    for path in class_files(reader_dir):
        shutil.copyfile(path, workdir / path.name)
    return data


# ---------------------------------------------------------------- the Java reader


def find_javac(javac: str | None = None, java: str | None = None) -> str:
    """The javac to use: `javac`, else $KREPLICA_JAVAC, else javac beside `java`, else on PATH."""
    candidate = javac or os.environ.get("KREPLICA_JAVAC")
    if candidate:
        found = shutil.which(candidate)
        if found is None:
            raise CheckerError(f"javac not found: {candidate!r} is not an executable; {JAVAC_HINT}")
        return found
    java_path = shutil.which(java or os.environ.get("KREPLICA_JAVA") or "java")
    if java_path is not None:
        beside = Path(java_path).resolve().parent / "javac"
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    found = shutil.which("javac")
    if found is None:
        raise CheckerError(f"javac not found (the trace data reader is compiled); {JAVAC_HINT}")
    return found


def default_cache_dir() -> Path:
    """$KREPLICA_CACHE_DIR, else $XDG_CACHE_HOME/kreplica, else ~/.cache/kreplica."""
    named = os.environ.get("KREPLICA_CACHE_DIR")
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kreplica"


def _digest(*paths: Path) -> str:
    """A short hash of the files' contents."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def build_reader(
    jar: Path | None = None,
    cache_dir: Path | None = None,
    javac: str | None = None,
    java: str | None = None,
) -> Path:
    """Compile the reader against `jar` (once per source and jar); return its class directory.

    The directory (under `cache_dir`, keyed by a hash of the source and the jar) holds
    `TraceData.class` and its nested class. CheckerError if javac is missing or fails.
    """
    jar = find_tla2tools(jar)
    root = (cache_dir or default_cache_dir()) / "tlc-reader"
    target = root / _digest(*JAVA_SOURCES, jar)
    if (target / f"{MODULE}.class").is_file():
        return target
    compiler = find_javac(javac, java)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        cmd = [compiler, "--release", "11", "-nowarn", "-cp", str(jar), "-d", str(staging)]
        sources = [str(path) for path in JAVA_SOURCES]
        done = subprocess.run([*cmd, *sources], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise CheckerError(
                f"javac failed on the trace reader: {detail[0] if detail else done.returncode}"
            )
        try:
            staging.rename(target)
        except OSError:
            if not (target / f"{MODULE}.class").is_file():  # not another build's result
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def class_files(reader_dir: Path) -> list[Path]:
    """The compiled reader's class files (TraceData.class and its nested classes, and
    TraceAgreement.class)."""
    return sorted(
        [*reader_dir.glob(f"{MODULE}*.class"), *reader_dir.glob(f"{AGREEMENT_MODULE}*.class")]
    )


def install(workdir: Path, traces: Sequence[ItfTrace], reader_dir: Path) -> Path:
    """Put the batch beside the spec in `workdir`: stub module, data file, reader classes.

    TLC, run on a spec in `workdir` that extends TraceData, then takes TraceLog from the data
    file without further arguments. Returns the data file's path.
    """
    (workdir / f"{MODULE}.tla").write_text(STUB_MODULE, encoding="utf-8")
    data = workdir / DATA_FILE
    data.write_bytes(encode_traces(traces))
    for path in class_files(reader_dir):
        shutil.copyfile(path, workdir / path.name)
    return data


def jvm_args(reader_dir: Path, data_file: Path, jar: Path | None = None) -> list[str]:
    """The JVM arguments for the classpath way: `-cp tla2tools.jar:<reader>` and the property.

    They go before `tlc2.TLC` (in place of `-cp tla2tools.jar`); the spec's directory must
    still hold the stub module `STUB_MODULE` as TraceData.tla.
    """
    classpath = os.pathsep.join([str(find_tla2tools(jar)), str(reader_dir)])
    return ["-cp", classpath, f"-D{PROPERTY}={data_file}"]
