/*
 * A Java override of the TLA+ module TraceData for TLC (tla2tools 2.15): TLC takes the value of
 * TraceLog from a compact binary file instead of parsing it as TLA+ (SANY is slow on big modules).
 *
 * TLC replaces the definitions of a module by the public static methods, of the same name and
 * arity, of a class named after the module, found beside the spec or on the classpath.  The
 * module TraceData.tla must still exist (KafkaReplicationTrace extends it) and define TraceLog;
 * a stub such as `TraceLog == <<>>` does.
 *
 * The file is named by the system property kreplica.tracedata; without it, TraceData.kdat in
 * the directory this class was loaded from.  It is read once; the value is kept.  With
 * -Dkreplica.tracedata.verbose=true it says on stderr how long reading took.
 *
 * The format (written by kreplica.conformance.validate.tlcdata; all counts are unsigned LEB128 varints):
 *   "KRTD" 0x01                  magic and version
 *   n, n x (len, UTF-8 bytes)    the string table (strings and record field names)
 *   one value                    TraceLog
 * A value is a tag byte followed by:
 *   'i' zigzag varint            an integer (32 bits, as TLC's)
 *   's' index                    a string of the table
 *   't' / 'f'                    TRUE / FALSE
 *   'T' n, n values              a tuple (sequence)
 *   'S' n, n values              a set
 *   'R' n, n x (index, value)    a record: field name (index of the table) and value
 *   'F' n, n x (value, value)    a function: key and value
 *   'J' len, UTF-8 bytes         one trace as ITF JSON text, read by TraceDataJson
 * Between the string table and TraceLog there may be a vocabulary, which JSON traces are held
 * to (a string is len and UTF-8 bytes):
 *   'V' n, n strings             the spec's variables, in the spec's order
 *       m, m x (string, k, k strings)   each action and its argument names
 *       ['Y' s, s x (key, shape)]       optional: the shapes of the variables (key: the
 *                                       name) and of the arguments ("Action.argument"),
 *                                       as TraceDataJson.Shape parses them
 * The file ends right after TraceLog.
 *
 * For each JSON trace it prints a line as PrintT would, numbered by the trace's place in the
 * file (1-based): <<"kreplica-events", number, events>> (its events after the initial state),
 * or <<"kreplica-invalid", number, "why">> for a trace it refuses.  A refused trace is replaced
 * by one whose initial state matches no Init, so it never conforms and the others still run.
 *
 * Shared prefixes (TraceDataPrefixes): when TraceLog is a tuple of JSON traces, a trace whose
 * hidden variables and first events are those of an earlier trace gets the fields that let
 * KafkaReplicationTrace walk those events once (s, k, n: see the top of that module), and a
 * line <<"kreplica-share", number, holder, shared>>: its first `shared` events are walked in
 * trace `holder`, which holds the last of them.  -Dkreplica.tracedata.share=false turns it off.
 *
 * A quick exit (QuickExit): TLC exports its fingerprint set over RMI, for distributed TLC, and
 * RMI's accept thread then waits for a connection in native code; a JVM that exits waits 300 ms
 * for threads in native code to stop.  Before TLC makes its fingerprint set (after it has read
 * TraceLog), the first call of TraceLog gives RMI server sockets that wait in Java instead, on
 * loopback: no connection is ever made to them, and TLC exits at once when it is done.
 */

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.rmi.server.RMISocketFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import tlc2.output.EC;
import tlc2.tool.EvalException;
import tlc2.value.impl.BoolValue;
import tlc2.value.impl.FcnRcdValue;
import tlc2.value.impl.IntValue;
import tlc2.value.impl.RecordValue;
import tlc2.value.impl.SetEnumValue;
import tlc2.value.impl.StringValue;
import tlc2.value.impl.TupleValue;
import tlc2.value.impl.Value;
import util.UniqueString;

public final class TraceData {
    public static final String PROPERTY = "kreplica.tracedata";
    public static final String DEFAULT_FILE = "TraceData.kdat";
    public static final String VERBOSE = "kreplica.tracedata.verbose";
    public static final String SHARE = "kreplica.tracedata.share";
    private static final byte[] MAGIC = {'K', 'R', 'T', 'D', 1};

    private static Value traceLog;

    private TraceData() {}

    /** The override of TraceLog: the value in the data file, read on the first call. */
    public static synchronized Value TraceLog() {
        if (traceLog == null) {
            QuickExit.install();
            Path file = dataFile();
            try {
                long start = System.nanoTime();
                byte[] data = Files.readAllBytes(file);
                traceLog = decode(data);
                if (Boolean.getBoolean(VERBOSE)) {
                    System.err.printf("kreplica TraceData: %d bytes from %s in %.1f ms%n",
                            data.length, file, (System.nanoTime() - start) / 1e6);
                }
            } catch (NoSuchFileException e) {
                throw fail("trace data file not found: " + file);
            } catch (IOException e) {
                throw fail("cannot read trace data file " + file + ": " + e);
            } catch (IllegalArgumentException e) {
                throw fail("bad trace data file " + file + ": " + e.getMessage());
            }
        }
        return traceLog;
    }

    /** RMI server sockets whose accept waits in Java, so that the JVM exits without waiting. */
    private static final class QuickExit extends RMISocketFactory {
        static void install() {
            try {
                RMISocketFactory.setSocketFactory(new QuickExit());
            } catch (IOException | SecurityException e) { // one is set already: keep it
            }
        }

        @Override
        public Socket createSocket(String host, int port) throws IOException {
            return new Socket(host, port);
        }

        @Override
        public ServerSocket createServerSocket(int port) throws IOException {
            return new ServerSocket(port, 1, InetAddress.getLoopbackAddress()) {
                @Override
                public Socket accept() throws IOException {
                    synchronized (this) {
                        while (true) { // nobody connects: TLC runs on one machine
                            try {
                                wait();
                            } catch (InterruptedException e) {
                                throw new IOException("interrupted", e);
                            }
                        }
                    }
                }
            };
        }
    }

    private static EvalException fail(String message) {
        return new EvalException(EC.GENERAL, "kreplica TraceData: " + message);
    }

    private static Path dataFile() {
        String named = System.getProperty(PROPERTY);
        if (named != null && !named.isEmpty()) {
            return Paths.get(named);
        }
        try {
            Path here = Paths.get(TraceData.class.getProtectionDomain().getCodeSource()
                    .getLocation().toURI());
            return (Files.isDirectory(here) ? here : here.getParent()).resolve(DEFAULT_FILE);
        } catch (URISyntaxException | RuntimeException e) {
            return Paths.get(DEFAULT_FILE);
        }
    }

    /** Decode a whole data file (IllegalArgumentException if it is malformed). */
    static Value decode(byte[] data) {
        Reader in = new Reader(data);
        for (byte b : MAGIC) {
            if (in.pos >= data.length || data[in.pos++] != b) {
                throw new IllegalArgumentException("not a kreplica trace data file (version 1)");
            }
        }
        in.table();
        in.vocabulary();
        Value value = in.value(0);
        if (in.pos != data.length) {
            throw new IllegalArgumentException((data.length - in.pos) + " bytes after the value");
        }
        value.deepNormalize();
        if (in.jsonTraces > 0 && value instanceof TupleValue
                && ((TupleValue) value).elems.length == in.jsonTraces
                && !"false".equals(System.getProperty(SHARE))) {
            value = TraceDataPrefixes.share((TupleValue) value, in.refused);
            value.deepNormalize();
        }
        return value;
    }

    /** A trace whose initial state no Init has (nextRecord is never -1): a refused one. */
    private static final Value NEVER_CONFORMS = new RecordValue(
            new UniqueString[] {UniqueString.uniqueStringOf("hidden"),
                UniqueString.uniqueStringOf("events")},
            new Value[] {new SetEnumValue(new Value[0], false), new TupleValue(new Value[] {
                new RecordValue(
                    new UniqueString[] {UniqueString.uniqueStringOf("e"),
                        UniqueString.uniqueStringOf("a"), UniqueString.uniqueStringOf("v")},
                    new Value[] {new StringValue("Init"), TupleValue.EmptyTuple,
                        new RecordValue(
                            new UniqueString[] {UniqueString.uniqueStringOf("nextRecord")},
                            new Value[] {IntValue.gen(-1)}, false)},
                    false)})},
            false);

    /** `text` as a TLA+ string literal. */
    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '\\' || c == '"') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c == 0x7f) {
                out.append(' '); // TLC's output is read line by line: nothing unprintable
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static final class Reader {
        private static final int MAX_DEPTH = 1000;
        private final byte[] data;
        private int pos;
        private StringValue[] strings;
        private UniqueString[] names;
        private TraceDataJson.Vocabulary vocabulary;
        private int jsonTraces;
        private final Set<Integer> refused = new HashSet<>();

        Reader(byte[] data) {
            this.data = data;
        }

        /** Read a string table: n, then n strings (length and UTF-8 bytes). */
        void table() {
            int n = count();
            strings = new StringValue[n];
            names = new UniqueString[n];
            for (int i = 0; i < n; i++) {
                int len = count();
                need(len);
                String s = new String(data, pos, len, StandardCharsets.UTF_8);
                pos += len;
                names[i] = UniqueString.uniqueStringOf(s);
                strings[i] = new StringValue(names[i]);
            }
        }

        /** Read the vocabulary ('V'), if the file has one. */
        void vocabulary() {
            if (pos >= data.length || data[pos] != 'V') {
                return;
            }
            pos++;
            List<String> variables = new ArrayList<>();
            for (int n = count(), i = 0; i < n; i++) {
                variables.add(rawString());
            }
            Map<String, Set<String>> actions = new HashMap<>();
            for (int n = count(), i = 0; i < n; i++) {
                String action = rawString();
                Set<String> args = new HashSet<>();
                for (int k = count(), j = 0; j < k; j++) {
                    args.add(rawString());
                }
                actions.put(action, args);
            }
            vocabulary = new TraceDataJson.Vocabulary(variables, actions);
            if (pos < data.length && data[pos] == 'Y') {
                pos++;
                for (int n = count(), i = 0; i < n; i++) {
                    String key = rawString();
                    vocabulary.shapes.put(key, TraceDataJson.Shape.parse(rawString()));
                }
            }
        }

        String rawString() {
            int len = count();
            need(len);
            String s = new String(data, pos, len, StandardCharsets.UTF_8);
            pos += len;
            return s;
        }

        /** A 'J' trace: read by TraceDataJson, its event count (or refusal) printed. */
        Value jsonTrace() {
            int len = count();
            need(len);
            byte[] json = java.util.Arrays.copyOfRange(data, pos, pos + len);
            pos += len;
            int number = ++jsonTraces;
            try {
                TraceDataJson.Trace trace = TraceDataJson.read(json, vocabulary);
                System.out.println("<<\"kreplica-events\", " + number + ", " + trace.events + ">>");
                return trace.value;
            } catch (TraceDataJson.Invalid e) {
                refused.add(number);
                return refused(number, e.getMessage());
            } catch (RuntimeException | StackOverflowError e) { // this trace's, not the batch's
                refused.add(number);
                return refused(number, "the reader failed on it: " + e);
            }
        }

        /** Say that trace `number` is refused, and why; the value standing for it. */
        private static Value refused(int number, String why) {
            System.out.println("<<\"kreplica-invalid\", " + number + ", " + quote(why) + ">>");
            return NEVER_CONFORMS;
        }

        void need(int n) {
            if (n < 0 || data.length - pos < n) {
                throw new IllegalArgumentException("truncated at byte " + pos);
            }
        }

        long varint() {
            long result = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                need(1);
                byte b = data[pos++];
                result |= (long) (b & 0x7f) << shift;
                if (b >= 0) {
                    return result;
                }
            }
            throw new IllegalArgumentException("varint too long at byte " + pos);
        }

        int count() {
            long n = varint();
            if (n > data.length) {
                throw new IllegalArgumentException("count " + n + " too large at byte " + pos);
            }
            return (int) n;
        }

        int index() {
            int i = count();
            if (i >= strings.length) {
                throw new IllegalArgumentException("string index " + i + " out of range");
            }
            return i;
        }

        Value value(int depth) {
            if (depth > MAX_DEPTH) {
                throw new IllegalArgumentException("values nested too deeply");
            }
            need(1);
            int at = pos;
            byte tag = data[pos++];
            switch (tag) {
                case 'i': {
                    long z = varint();
                    long v = (z >>> 1) ^ -(z & 1);
                    if (v != (int) v) {
                        throw new IllegalArgumentException("integer out of range at byte " + at);
                    }
                    return IntValue.gen((int) v);
                }
                case 's':
                    return strings[index()];
                case 't':
                    return BoolValue.ValTrue;
                case 'f':
                    return BoolValue.ValFalse;
                case 'T': {
                    int n = count();
                    if (n == 0) {
                        return TupleValue.EmptyTuple;
                    }
                    Value[] elems = new Value[n];
                    for (int i = 0; i < n; i++) {
                        elems[i] = value(depth + 1);
                    }
                    return new TupleValue(elems);
                }
                case 'S': {
                    int n = count();
                    Value[] elems = new Value[n];
                    for (int i = 0; i < n; i++) {
                        elems[i] = value(depth + 1);
                    }
                    return new SetEnumValue(elems, false);
                }
                case 'R': {
                    int n = count();
                    UniqueString[] fields = new UniqueString[n];
                    Value[] values = new Value[n];
                    for (int i = 0; i < n; i++) {
                        fields[i] = names[index()];
                        values[i] = value(depth + 1);
                    }
                    return new RecordValue(fields, values, false);
                }
                case 'F': {
                    int n = count();
                    Value[] keys = new Value[n];
                    Value[] values = new Value[n];
                    for (int i = 0; i < n; i++) {
                        keys[i] = value(depth + 1);
                        values[i] = value(depth + 1);
                    }
                    return new FcnRcdValue(keys, values, false);
                }
                case 'J':
                    return jsonTrace();
                default:
                    throw new IllegalArgumentException(
                            "unknown tag 0x" + Integer.toHexString(tag & 0xff) + " at byte " + at);
            }
        }
    }
}
