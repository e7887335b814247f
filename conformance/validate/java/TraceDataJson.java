/*
 * Reads one ITF trace from its JSON text into the value KafkaReplicationTrace expects of a trace
 * (see the comment at the top of spec/KafkaReplicationTrace.tla):
 *
 *   [hidden |-> names of the spec's variables the trace never records,
 *    events |-> << [e |-> action, a |-> arguments, v |-> recorded variables that changed], ... >>]
 *
 * ITF values become TLC values as kreplica.conformance.tla.itf reads them: numbers are integers
 * (32 bits, as TLC's), arrays and #tup are tuples, #set is a set, #map and objects whose keys
 * are not all identifiers are functions, other objects are records, {} and an empty #map are
 * <<>>, #bigint is an integer; an object with a key that starts with # must be one of those
 * tags, alone.  A variable counts as changed when its JSON text differs from the one in the
 * state before; a reformatted but equal value is merely checked once more.
 *
 * Reading is most of what TLC does with a trace before checking it, so it is built for speed:
 * a variable whose text repeats the state before is compared, not parsed (Parser.repeated); a
 * changed one is built straight into TLC values (Parser.fast); an array or object whose text
 * was read before in the trace is shared, not built again (Shared).  Anything unusual
 * (escapes, tags, bad syntax) goes the exact way: a JSON tree, then Builder.convert, which
 * says what is wrong.
 *
 * Every state must hold every variable in `vars`, and no other, as kreplica.conformance.tla.itf
 * demands.  With a vocabulary (the spec's variables and each action's argument names) a trace
 * that names anything else is refused, as the Python reader refuses it; with the vocabulary's
 * shapes (Shape), so is a trace whose values have another type than the spec's, which TLC could
 * not compare.  A string holding a raw control character is refused, as RFC 8259 and Python's
 * reader refuse it.  Every refusal is an Invalid exception carrying one line that says why, and
 * costs only its own trace (TraceData.Reader.jsonTrace).
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import tlc2.value.impl.BoolValue;
import tlc2.value.impl.FcnRcdValue;
import tlc2.value.impl.IntValue;
import tlc2.value.impl.RecordValue;
import tlc2.value.impl.SetEnumValue;
import tlc2.value.impl.StringValue;
import tlc2.value.impl.TupleValue;
import tlc2.value.impl.Value;
import util.UniqueString;

final class TraceDataJson {
    private static final int MAX_DEPTH = 1000;
    private static final String INIT = "Init";
    /** The nesting of a state in the document: {"states": [here]}. */
    private static final int STATE_DEPTH = 2;

    private TraceDataJson() {}

    /** A trace the reader refuses, with the reason in one line. */
    static final class Invalid extends Exception {
        private static final long serialVersionUID = 1L;

        Invalid(String message) {
            super(message);
        }
    }

    /**
     * The spec's variables, in the spec's order, the argument names of each action, and the
     * shapes of the variables (by name) and of the arguments (by "Action.argument"); no
     * shapes, no shape checks.
     */
    static final class Vocabulary {
        final List<String> variables;
        final Map<String, Set<String>> actionArgs;
        final Map<String, Shape> shapes = new java.util.HashMap<>();

        Vocabulary(List<String> variables, Map<String, Set<String>> actionArgs) {
            this.variables = variables;
            this.actionArgs = actionArgs;
        }
    }

    /**
     * A TLA+ type a trace's value must have, as kreplica.conformance.validate.shapes writes
     * it: int, str, bool, seq(T), set(T), rec(f:T,...) (exactly these fields), and
     * msg(Name=rec(...),...) (a record whose field `type` names its shape).  A trace whose
     * value has another shape is refused, naming the step and the variable: TLC would stop the
     * whole batch with an evaluation error when it compared that value.
     */
    static final class Shape {
        final String kind;
        final Shape elem;
        final Map<String, Shape> fields;

        private Shape(String kind, Shape elem, Map<String, Shape> fields) {
            this.kind = kind;
            this.elem = elem;
            this.fields = fields;
        }

        /** The shape written as `text` (IllegalArgumentException if it is not one). */
        static Shape parse(String text) {
            int[] at = {0};
            Shape shape = parse(text, at);
            if (at[0] != text.length()) {
                throw new IllegalArgumentException("bad shape " + text);
            }
            return shape;
        }

        private static Shape parse(String text, int[] at) {
            int start = at[0];
            while (at[0] < text.length() && Character.isLetter(text.charAt(at[0]))) {
                at[0]++;
            }
            String kind = text.substring(start, at[0]);
            switch (kind) {
                case "int": case "str": case "bool":
                    return new Shape(kind, null, null);
                case "seq": case "set": {
                    expect(text, at, '(');
                    Shape elem = parse(text, at);
                    expect(text, at, ')');
                    return new Shape(kind, elem, null);
                }
                case "rec": case "msg": {
                    expect(text, at, '(');
                    Map<String, Shape> fields = new LinkedHashMap<>();
                    char sep = kind.equals("rec") ? ':' : '=';
                    while (true) {
                        int name = at[0];
                        while (at[0] < text.length() && text.charAt(at[0]) != sep) {
                            at[0]++;
                        }
                        String field = text.substring(name, at[0]);
                        expect(text, at, sep);
                        fields.put(field, parse(text, at));
                        if (at[0] < text.length() && text.charAt(at[0]) == ',') {
                            at[0]++;
                            continue;
                        }
                        expect(text, at, ')');
                        return new Shape(kind, null, fields);
                    }
                }
                default:
                    throw new IllegalArgumentException("bad shape " + text);
            }
        }

        private static void expect(String text, int[] at, char c) {
            if (at[0] >= text.length() || text.charAt(at[0]) != c) {
                throw new IllegalArgumentException("bad shape " + text);
            }
            at[0]++;
        }

        /**
         * Whether `v` has this shape.  `checked` holds the composite values of the trace found
         * to fit so far, by identity: a value the reader shares (a message still in flight, a
         * replica's unchanged log) is checked once.  (A trace that does not fit is read again
         * in Python, whose message names the exact place: kreplica.conformance.validate.shapes.)
         */
        boolean fits(Value v, Map<Value, Shape> checked) {
            switch (kind) {
                case "int":
                    return v instanceof IntValue;
                case "str":
                    return v instanceof StringValue;
                case "bool":
                    return v instanceof BoolValue;
                default:
                    break;
            }
            if (checked.get(v) == this) {
                return true;
            }
            if (!composite(v, checked)) {
                return false;
            }
            checked.put(v, this);
            return true;
        }

        private boolean composite(Value v, Map<Value, Shape> checked) {
            switch (kind) {
                case "seq": {
                    if (!(v instanceof TupleValue)) {
                        return false;
                    }
                    for (Value item : ((TupleValue) v).elems) {
                        if (!elem.fits(item, checked)) {
                            return false;
                        }
                    }
                    return true;
                }
                case "set": {
                    if (!(v instanceof SetEnumValue)) {
                        return false;
                    }
                    tlc2.value.impl.ValueVec elems = ((SetEnumValue) v).elems;
                    for (int i = 0; i < elems.size(); i++) {
                        if (!elem.fits(elems.elementAt(i), checked)) {
                            return false;
                        }
                    }
                    return true;
                }
                case "rec":
                    return record(v, checked);
                default: {
                    if (!(v instanceof RecordValue)) {
                        return false;
                    }
                    RecordValue r = (RecordValue) v;
                    for (int i = 0; i < r.names.length; i++) {
                        if (r.names[i].toString().equals("type")
                                && r.values[i] instanceof StringValue) {
                            Shape shape = fields.get(((StringValue) r.values[i]).val.toString());
                            return shape != null && shape.fits(v, checked);
                        }
                    }
                    return false;
                }
            }
        }

        private boolean record(Value v, Map<Value, Shape> checked) {
            if (!(v instanceof RecordValue)) {
                return false;
            }
            RecordValue r = (RecordValue) v;
            if (r.names.length != fields.size()) {
                return false;
            }
            for (int i = 0; i < r.names.length; i++) {
                Shape shape = fields.get(r.names[i].toString());
                if (shape == null || !shape.fits(r.values[i], checked)) {
                    return false;
                }
            }
            return true;
        }

        /** The shape as text, as Python wrote it. */
        @Override
        public String toString() {
            if (elem == null && fields == null) {
                return kind;
            }
            if (elem != null) {
                return kind + "(" + elem + ")";
            }
            StringBuilder out = new StringBuilder(kind).append('(');
            String sep = kind.equals("rec") ? ":" : "=";
            for (Map.Entry<String, Shape> e : fields.entrySet()) {
                if (out.charAt(out.length() - 1) != '(') {
                    out.append(',');
                }
                out.append(e.getKey()).append(sep).append(e.getValue());
            }
            return out.append(')').toString();
        }
    }

    /** A parsed JSON value and where its text lies (to tell changed variables cheaply). */
    private static final class Node {
        final Object value; // Map<String, Node>, List<Node>, String, Long, Boolean, or Value
        final int start;
        final int end;

        Node(Object value, int start, int end) {
            this.value = value;
            this.start = start;
            this.end = end;
        }
    }

    /** One event count and the trace value of the JSON text `json`. */
    static final class Trace {
        final int events;
        final Value value;

        Trace(int events, Value value) {
            this.events = events;
            this.value = value;
        }
    }

    private static final Value[] NO_VALUES = new Value[0];

    /**
     * Strings by their UTF-8 bytes, so that a repeated one (a key, a name) costs a lookup
     * instead of a new String, and is the same String (map lookups then compare identities).
     */
    private static final class Names {
        private static final int SIZE = 1 << 10;
        private final byte[][] keys = new byte[SIZE][];
        private final String[] texts = new String[SIZE];
        private final UniqueString[] names = new UniqueString[SIZE];

        /** The string in[start, end) as a String. */
        String text(byte[] in, int start, int end) {
            int slot = slot(in, start, end);
            return slot < 0 ? decode(in, start, end) : texts[slot];
        }

        /** The string in[start, end) as a TLC name. */
        UniqueString name(byte[] in, int start, int end) {
            int slot = slot(in, start, end);
            if (slot < 0) {
                return UniqueString.uniqueStringOf(decode(in, start, end));
            }
            if (names[slot] == null) {
                names[slot] = UniqueString.uniqueStringOf(texts[slot]);
            }
            return names[slot];
        }

        /** The slot holding in[start, end), filled now if need be; -1 if the table is full. */
        private int slot(byte[] in, int start, int end) {
            int h = 1;
            for (int i = start; i < end; i++) {
                h = 31 * h + in[i];
            }
            for (int probe = 0; probe < 8; probe++) {
                int slot = (h + probe) & (SIZE - 1);
                byte[] key = keys[slot];
                if (key == null) {
                    keys[slot] = Arrays.copyOfRange(in, start, end);
                    texts[slot] = decode(in, start, end);
                    return slot;
                }
                if (Arrays.equals(key, 0, key.length, in, start, end)) {
                    return slot;
                }
            }
            return -1;
        }

        private static String decode(byte[] in, int start, int end) {
            return new String(in, start, end - start, StandardCharsets.UTF_8);
        }
    }

    /**
     * The arrays and objects of a trace built so far, by their text: one value that stays
     * (a message in flight, a log entry) is written out again in every state, and is built
     * once and shared (TLC's values are immutable) instead of once per state.
     */
    private static final class Shared {
        /** Shorter values are built again: looking them up would cost as much. */
        private static final int MIN_LENGTH = 24;
        private final Map<Key, Value> values = new java.util.HashMap<>();
        private final Key probe = new Key();
        /** The hash of the bytes `extent` measured last. */
        int hash;

        /** A value's text in a trace: its range and a hash of its bytes. */
        private static final class Key {
            byte[] text;
            int start;
            int end;
            int hash;

            @Override
            public int hashCode() {
                return hash;
            }

            @Override
            public boolean equals(Object o) {
                Key k = (Key) o;
                return k.hash == hash
                        && Arrays.equals(text, start, end, k.text, k.start, k.end);
            }
        }

        /**
         * Where the array or object at `start` ends (its closing bracket, + 1), with a hash of
         * its bytes; -1 for anything else or an unbalanced one (then the parser finds the error).
         */
        int extent(byte[] in, int start) {
            if (start >= in.length || (in[start] != '[' && in[start] != '{')) {
                return -1;
            }
            int depth = 0;
            int h = 1;
            int i = start;
            while (i < in.length) {
                byte b = in[i++];
                h = 31 * h + b;
                if (b == '"') {
                    while (i < in.length && in[i] != '"') {
                        h = 31 * h + in[i];
                        i += in[i] == '\\' ? 2 : 1;
                    }
                    i++;
                } else if (b == '[' || b == '{') {
                    depth++;
                } else if ((b == ']' || b == '}') && --depth == 0) {
                    hash = h;
                    return i;
                }
            }
            return -1;
        }

        /** The value already built from the same text as in[start, end); or null. */
        Value get(byte[] in, int start, int end, int hash) {
            if (end - start < MIN_LENGTH) {
                return null;
            }
            probe.text = in;
            probe.start = start;
            probe.end = end;
            probe.hash = hash;
            return values.get(probe);
        }

        void put(byte[] in, int start, int end, int hash, Value value) {
            if (end - start >= MIN_LENGTH) {
                Key key = new Key();
                key.text = in;
                key.start = start;
                key.end = end;
                key.hash = hash;
                values.put(key, value);
            }
        }
    }

    /** The trace value of the ITF JSON text in `json` (all of it). */
    static Trace read(byte[] json, Vocabulary vocabulary) throws Invalid {
        Parser parser = new Parser(json);
        Node top = parser.document();
        return new Builder(vocabulary).trace(top);
    }

    // ------------------------------------------------------------------ from JSON to a trace

    private static final class Builder {
        private final Vocabulary vocabulary;
        /** The trace's composite values that fit their shapes (see Shape.fits). */
        private final Map<Value, Shape> checked = new java.util.IdentityHashMap<>();

        Builder(Vocabulary vocabulary) {
            this.vocabulary = vocabulary;
        }

        Trace trace(Node top) throws Invalid {
            Map<String, Node> fields = object(top, "the trace");
            List<String> vars = strings(fields.get("vars"), "vars");
            List<Node> states = array(fields.get("states"), "states");
            if (states.isEmpty()) {
                throw new Invalid("the trace has no states");
            }
            List<String> order = vocabulary != null ? vocabulary.variables : vars;
            for (String v : vars) {
                if (vocabulary != null && !order.contains(v)) {
                    throw new Invalid("unknown variable '" + v + "'");
                }
            }
            List<String> hidden = new ArrayList<>();
            List<String> observed = new ArrayList<>();
            for (String v : order) {
                (vars.contains(v) ? observed : hidden).add(v);
            }
            Set<String> declared = new java.util.HashSet<>(vars);
            Value[] events = new Value[states.size()];
            Map<String, Node> previous = null;
            for (int i = 0; i < events.length; i++) {
                Map<String, Node> state = object(states.get(i), "state " + i);
                events[i] = event(i, state, previous, observed, declared);
                previous = state;
            }
            Value value = new RecordValue(
                    new UniqueString[] {name("hidden"), name("events")},
                    new Value[] {stringSet(hidden), new TupleValue(events)},
                    false);
            return new Trace(events.length - 1, value);
        }

        private Value event(int index, Map<String, Node> state, Map<String, Node> previous,
                List<String> observed, Set<String> declared) throws Invalid {
            Node metaNode = state.get("#meta");
            Map<String, Node> meta = metaNode == null ? Map.of() : object(metaNode, "#meta");
            String action = INIT;
            Node actionNode = meta.get("action");
            if (actionNode != null && !(actionNode.value instanceof String)) {
                throw new Invalid("state " + index + ": '#meta'.action must be a string");
            }
            if (actionNode != null && !((String) actionNode.value).isEmpty()) {
                action = (String) actionNode.value;
            }
            Node argsNode = meta.get("args");
            if (argsNode != null && !(argsNode.value instanceof Map)) {
                throw new Invalid("state " + index + ": '#meta'.args must be a JSON object");
            }
            if (index > 0 && vocabulary != null) {
                checkAction(index, action, argsNode);
            }
            for (String key : state.keySet()) {
                if (!key.equals("#meta") && !declared.contains(key)) {
                    throw new Invalid("state " + index + ": variable '" + key
                            + "' is not declared in 'vars'");
                }
            }
            Set<String> omitted = omitted(index, meta);
            List<String> missing = new ArrayList<>();
            List<UniqueString> names = new ArrayList<>();
            List<Value> values = new ArrayList<>();
            for (String v : observed) {
                Node now = state.get(v);
                if (now == null) {
                    if (omitted.contains(v)) {  // left out of this one state: unconstrained
                        missing.add(v);
                        continue;
                    }
                    throw new Invalid("state " + index + ": missing variable '" + v + "'");
                }
                // The parser shares the value of a variable whose text repeats the state
                // before (Parser.repeated), so the same value means unchanged.
                Node before = previous == null ? null : previous.get(v);
                if (before == null || before.value != now.value) {
                    Value value = convert(now, 0);
                    Shape shape = vocabulary == null ? null : vocabulary.shapes.get(v);
                    if (shape != null && !shape.fits(value, checked)) {
                        throw new Invalid("step " + index + ": variable '" + v
                                + "': not of the spec's type " + shape);
                    }
                    names.add(name(v));
                    values.add(value);
                }
            }
            Value args = argsNode == null || isEmptyObject(argsNode)
                    ? TupleValue.EmptyTuple : convert(argsNode, 0);
            if (index > 0 && vocabulary != null && args instanceof RecordValue) {
                RecordValue given = (RecordValue) args;
                for (int i = 0; i < given.names.length; i++) {
                    String arg = given.names[i].toString();
                    Shape shape = vocabulary.shapes.get(action + "." + arg);
                    if (shape != null && !shape.fits(given.values[i], checked)) {
                        throw new Invalid("step " + index + ": argument '" + arg
                                + "': not of the spec's type " + shape);
                    }
                }
            }
            Value changed = names.isEmpty() ? TupleValue.EmptyTuple
                    : new RecordValue(names.toArray(new UniqueString[names.size()]),
                            values.toArray(new Value[values.size()]), false);
            if (!missing.isEmpty()) {
                UniqueString[] fields = {name("e"), name("a"), name("v"), name("o")};
                Value[] parts = {new StringValue(action), args, changed, stringSet(missing)};
                return new RecordValue(fields, parts, false);
            }
            UniqueString[] fields = {name("e"), name("a"), name("v")};
            Value[] parts = {new StringValue(action), args, changed};
            return new RecordValue(fields, parts, false);
        }

        /** The variables a state's '#meta'.omitted leaves out of it (none in the first). */
        private Set<String> omitted(int index, Map<String, Node> meta) throws Invalid {
            Node node = meta.get("omitted");
            if (node == null) {
                return Set.of();
            }
            if (index == 0 || !(node.value instanceof List)) {
                throw new Invalid("state " + index + ": '#meta'.omitted must be a list of "
                        + "variable names, and the first state omits none");
            }
            Set<String> names = new java.util.HashSet<>();
            for (Object item : (List<?>) node.value) {
                Object name = item instanceof Node ? ((Node) item).value : item;
                if (!(name instanceof String)) {
                    throw new Invalid("state " + index + ": '#meta'.omitted must be a list of "
                            + "variable names");
                }
                names.add((String) name);
            }
            return names;
        }

        private void checkAction(int index, String action, Node argsNode) throws Invalid {
            Set<String> expected = vocabulary.actionArgs.get(action);
            if (expected == null) {
                throw new Invalid("step " + index + ": unknown action '" + action + "'");
            }
            Set<?> got = argsNode == null ? Set.of()
                    : argsNode.value instanceof Map ? ((Map<?, ?>) argsNode.value).keySet() : null;
            if (got == null || !got.equals(expected)) {
                throw new Invalid("step " + index + ": " + action + " takes arguments "
                        + String.join(", ", new java.util.TreeSet<>(expected)));
            }
        }

        /** The TLC value an ITF JSON value stands for. */
        static Value convert(Node node, int depth) throws Invalid {
            if (depth > MAX_DEPTH) {
                throw new Invalid("values nested too deeply");
            }
            Object v = node.value;
            if (v instanceof Value) {
                return (Value) v; // built by the parser (Parser.fast)
            }
            if (v instanceof Boolean) {
                return (Boolean) v ? BoolValue.ValTrue : BoolValue.ValFalse;
            }
            if (v instanceof Long) {
                return integer((Long) v);
            }
            if (v instanceof String) {
                return new StringValue((String) v);
            }
            if (v instanceof List) {
                return tuple(elements(node, depth));
            }
            @SuppressWarnings("unchecked")
            Map<String, Node> obj = (Map<String, Node>) v;
            for (String key : obj.keySet()) {
                if (key.startsWith("#") && obj.size() != 1) {
                    throw new Invalid("a tagged ITF value has exactly one key, found "
                            + new java.util.TreeSet<>(obj.keySet()));
                }
            }
            if (obj.size() == 1) {
                Map.Entry<String, Node> only = obj.entrySet().iterator().next();
                Value tagged = tagged(only.getKey(), only.getValue(), depth);
                if (tagged != null) {
                    return tagged;
                }
                if (only.getKey().startsWith("#")) {
                    throw new Invalid("unknown ITF tag '" + only.getKey() + "'");
                }
            }
            if (obj.isEmpty()) {
                return TupleValue.EmptyTuple;
            }
            boolean record = true;
            for (String key : obj.keySet()) {
                record &= isIdentifier(key);
            }
            UniqueString[] names = new UniqueString[obj.size()];
            Value[] keys = new Value[obj.size()];
            Value[] values = new Value[obj.size()];
            int i = 0;
            for (Map.Entry<String, Node> e : obj.entrySet()) {
                names[i] = name(e.getKey());
                keys[i] = new StringValue(names[i]);
                values[i++] = convert(e.getValue(), depth + 1);
            }
            return record ? new RecordValue(names, values, false)
                    : new FcnRcdValue(keys, values, false);
        }

        /** #set, #tup, #map or #bigint; null for an ordinary one-field object. */
        private static Value tagged(String form, Node body, int depth) throws Invalid {
            switch (form) {
                case "#set":
                    return new SetEnumValue(elements(bodyArray(form, body), depth), false);
                case "#tup":
                    return tuple(elements(bodyArray(form, body), depth));
                case "#map":
                    return map(array(bodyArray(form, body), form), depth);
                case "#bigint":
                    if (!(body.value instanceof String)) {
                        throw new Invalid("bad ITF #bigint value");
                    }
                    try {
                        return integer(Long.parseLong((String) body.value));
                    } catch (NumberFormatException e) {
                        throw new Invalid("bad #bigint '" + body.value + "'");
                    }
                case "#unserializable":
                    throw new Invalid("bad ITF #unserializable value");
                default:
                    return null;
            }
        }

        private static Node bodyArray(String form, Node body) throws Invalid {
            if (!(body.value instanceof List)) {
                throw new Invalid("bad ITF " + form + " value");
            }
            return body;
        }

        private static Value map(List<Node> pairs, int depth) throws Invalid {
            if (pairs.isEmpty()) {
                return TupleValue.EmptyTuple;
            }
            Value[] keys = new Value[pairs.size()];
            Value[] values = new Value[pairs.size()];
            for (int i = 0; i < keys.length; i++) {
                Object pair = pairs.get(i).value;
                if (!(pair instanceof List) || ((List<?>) pair).size() != 2) {
                    throw new Invalid("a #map entry is not a [key, value] pair");
                }
                List<?> kv = (List<?>) pair;
                keys[i] = convert((Node) kv.get(0), depth + 1);
                values[i] = convert((Node) kv.get(1), depth + 1);
            }
            return new FcnRcdValue(keys, values, false);
        }

        private static Value[] elements(Node node, int depth) throws Invalid {
            @SuppressWarnings("unchecked")
            List<Node> items = (List<Node>) node.value;
            Value[] out = new Value[items.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = convert(items.get(i), depth + 1);
            }
            return out;
        }

        private static Value tuple(Value[] elems) {
            return elems.length == 0 ? TupleValue.EmptyTuple : new TupleValue(elems);
        }

        private static Value integer(long v) throws Invalid {
            if (v != (int) v) {
                throw new Invalid("integer " + v + " is out of TLC's range (32 bits)");
            }
            return IntValue.gen((int) v);
        }

        private static Value stringSet(List<String> items) {
            Value[] out = new Value[items.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = new StringValue(items.get(i));
            }
            return new SetEnumValue(out, false);
        }

        private static boolean isEmptyObject(Node node) {
            return node.value instanceof Map && ((Map<?, ?>) node.value).isEmpty();
        }

        @SuppressWarnings("unchecked")
        private static Map<String, Node> object(Node node, String what) throws Invalid {
            if (node == null || !(node.value instanceof Map)) {
                throw new Invalid(what + " is not a JSON object");
            }
            return (Map<String, Node>) node.value;
        }

        @SuppressWarnings("unchecked")
        private static List<Node> array(Node node, String what) throws Invalid {
            if (node == null || !(node.value instanceof List)) {
                throw new Invalid(what + " is not a JSON array");
            }
            return (List<Node>) node.value;
        }

        private static List<String> strings(Node node, String what) throws Invalid {
            List<String> out = new ArrayList<>();
            for (Node item : array(node, what)) {
                if (!(item.value instanceof String)) {
                    throw new Invalid(what + " holds a non-string");
                }
                out.add((String) item.value);
            }
            return out;
        }

        /** A TLA+ record field name: letters, digits and _, not only digits, not TRUE/FALSE. */
        private static boolean isIdentifier(String s) {
            boolean letter = false;
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                boolean alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
                if (!alpha && !(c >= '0' && c <= '9')) {
                    return false;
                }
                letter |= alpha;
            }
            return letter && !s.equals("TRUE") && !s.equals("FALSE");
        }

        private static UniqueString name(String s) {
            return UniqueString.uniqueStringOf(s);
        }
    }

    // ------------------------------------------------------------------ a small JSON parser

    /** RFC 8259 JSON, without floats (ITF has none) and without null (ITF has none). */
    private static final class Parser {
        private final byte[] in;
        private int pos;
        /** The state parsed last: a variable whose text is the same again is not re-parsed. */
        private Map<String, Node> lastState = Map.of();
        /** The strings read so far, by their bytes (a trace repeats a few dozen). */
        private final Names names = new Names();
        /** The arrays and objects built so far, by their text (see Shared). */
        private final Shared shared = new Shared();
        /** Whether each name is a TLA+ identifier (a record field, not a function key). */
        private final Map<UniqueString, Boolean> identifiers = new java.util.IdentityHashMap<>();

        Parser(byte[] in) {
            this.in = in;
        }

        Node document() throws Invalid {
            Node node = value(0);
            space();
            if (pos != in.length) {
                throw error("text after the JSON value");
            }
            return node;
        }

        private Invalid error(String what) {
            return new Invalid("malformed JSON at byte " + pos + ": " + what);
        }

        private void space() {
            while (pos < in.length) {
                byte b = in[pos];
                if (b != ' ' && b != '\n' && b != '\r' && b != '\t') {
                    return;
                }
                pos++;
            }
        }

        private Node value(int depth) throws Invalid {
            if (depth > MAX_DEPTH) {
                throw error("nested too deeply");
            }
            space();
            if (pos >= in.length) {
                throw error("unexpected end");
            }
            int start = pos;
            byte b = in[pos];
            Object v;
            if (b == '{') {
                v = object(depth);
            } else if (b == '[') {
                v = array(depth);
            } else if (b == '"') {
                v = string();
            } else if (b == 't' || b == 'f') {
                v = literal(b == 't' ? "true" : "false", b == 't');
            } else if (b == '-' || (b >= '0' && b <= '9')) {
                v = number();
            } else {
                throw error("unexpected '" + (char) b + "'");
            }
            return new Node(v, start, pos);
        }

        private Map<String, Node> object(int depth) throws Invalid {
            pos++;
            Map<String, Node> out = new LinkedHashMap<>();
            space();
            if (peek() == '}') {
                pos++;
                return out;
            }
            while (true) {
                space();
                if (peek() != '"') {
                    throw error("expected a key");
                }
                String key = string();
                space();
                expect(':');
                boolean variable = depth == STATE_DEPTH && !key.equals("#meta");
                Node same = variable ? repeated(lastState.get(key)) : null;
                out.put(key, same != null ? same : variable ? variable(depth + 1) : value(depth + 1));
                space();
                byte b = next();
                if (b == '}') {
                    if (depth == STATE_DEPTH) {
                        lastState = out;
                    }
                    return out;
                }
                if (b != ',') {
                    throw error("expected ',' or '}'");
                }
            }
        }

        /**
         * The variable at `pos` if its text is the text of `before`, the same variable in the
         * state before, followed by ',' or '}' (so a number does not go on); else null.  Most
         * variables do not change from one state to the next, and this compares their bytes
         * instead of parsing them again (parsing them was most of the reader's time).
         */
        private Node repeated(Node before) {
            space();
            if (before == null) {
                return null;
            }
            int length = before.end - before.start;
            int end = pos + length;
            if (end > in.length || !Arrays.equals(in, pos, end, in, before.start, before.end)) {
                return null;
            }
            int after = end;
            while (after < in.length && (in[after] == ' ' || in[after] == '\n'
                    || in[after] == '\r' || in[after] == '\t')) {
                after++;
            }
            if (after == in.length || (in[after] != ',' && in[after] != '}')) {
                return null;
            }
            Node node = new Node(before.value, pos, end);
            pos = end;
            return node;
        }

        private List<Node> array(int depth) throws Invalid {
            pos++;
            List<Node> out = new ArrayList<>();
            space();
            if (peek() == ']') {
                pos++;
                return out;
            }
            while (true) {
                out.add(value(depth + 1));
                space();
                byte b = next();
                if (b == ']') {
                    return out;
                }
                if (b != ',') {
                    throw error("expected ',' or ']'");
                }
            }
        }

        private String string() throws Invalid {
            pos++;
            int start = pos;
            while (pos < in.length && in[pos] != '"' && in[pos] != '\\') {
                control();
                pos++;
            }
            if (pos < in.length && in[pos] == '"') {
                return names.text(in, start, pos++);
            }
            StringBuilder out = new StringBuilder(
                    new String(in, start, pos - start, StandardCharsets.UTF_8));
            while (true) {
                byte b = next();
                if (b == '"') {
                    return out.toString();
                }
                if (b != '\\') {
                    pos--;
                    int from = pos;
                    while (pos < in.length && in[pos] != '"' && in[pos] != '\\') {
                        control();
                        pos++;
                    }
                    out.append(new String(in, from, pos - from, StandardCharsets.UTF_8));
                    continue;
                }
                byte e = next();
                switch (e) {
                    case '"': out.append('"'); break;
                    case '\\': out.append('\\'); break;
                    case '/': out.append('/'); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'n': out.append('\n'); break;
                    case 'r': out.append('\r'); break;
                    case 't': out.append('\t'); break;
                    case 'u': out.append(unicode()); break;
                    default: throw error("bad escape");
                }
            }
        }

        /** JSON has no raw control characters in a string (RFC 8259: they must be escaped). */
        private void control() throws Invalid {
            if ((in[pos] & 0xff) < 0x20) {
                throw error("control character 0x" + Integer.toHexString(in[pos])
                        + " in a string (it must be escaped)");
            }
        }

        private char unicode() throws Invalid {
            if (in.length - pos < 4) {
                throw error("truncated \\u escape");
            }
            try {
                String hex = new String(in, pos, 4, StandardCharsets.US_ASCII);
                pos += 4;
                return (char) Integer.parseInt(hex, 16);
            } catch (NumberFormatException e) {
                throw error("bad \\u escape");
            }
        }

        private Object literal(String word, boolean value) throws Invalid {
            byte[] w = word.getBytes(StandardCharsets.US_ASCII);
            if (in.length - pos < w.length
                    || !Arrays.equals(in, pos, pos + w.length, w, 0, w.length)) {
                throw error("unexpected literal");
            }
            pos += w.length;
            return value;
        }

        private Long number() throws Invalid {
            int start = pos;
            if (peek() == '-') {
                pos++;
            }
            while (pos < in.length && in[pos] >= '0' && in[pos] <= '9') {
                pos++;
            }
            if (pos < in.length && (in[pos] == '.' || in[pos] == 'e' || in[pos] == 'E')) {
                throw error("ITF has no fractional numbers");
            }
            String digits = new String(in, start, pos - start, StandardCharsets.US_ASCII);
            try {
                return Long.parseLong(digits);
            } catch (NumberFormatException e) {
                throw error("number out of range: " + digits);
            }
        }

        // ------------------------------------------------ state variables, built directly

        /** A state variable's value, built as a TLC value as it is read (see `fast`). */
        private Node variable(int depth) throws Invalid {
            space();
            int start = pos;
            Value value = fast(depth);
            return new Node(value, start, pos);
        }

        /**
         * The TLC value of the JSON value at `pos`, as Builder.convert makes it, but built
         * while reading, without the Node tree, for the shapes traces are made of.  Anything
         * else (escapes, a tag with other fields, duplicate keys, bad syntax, #bigint) is read
         * again from its start by `value` and `convert`, which say exactly what is wrong.
         */
        private Value fast(int depth) throws Invalid {
            space();
            int start = pos;
            int end = shared.extent(in, start);
            int hash = shared.hash;
            Value value = shared.get(in, start, end, hash);
            if (value != null) {
                pos = end;
                return value;
            }
            value = depth <= MAX_DEPTH && pos < in.length ? attempt(depth) : null;
            if (value == null) {
                pos = start;
                value = Builder.convert(value(depth), 0);
            }
            if (pos == end) {
                shared.put(in, start, end, hash, value);
            }
            return value;
        }

        private Value attempt(int depth) throws Invalid {
            byte b = in[pos];
            if (b == '[') {
                Value[] elems = fastElements(depth);
                return elems == null ? null : Builder.tuple(elems);
            }
            if (b == '{') {
                return fastObject(depth);
            }
            if (b == '"') {
                UniqueString text = fastString();
                return text == null ? null : new StringValue(text);
            }
            if (b == '-' || (b >= '0' && b <= '9')) {
                return fastInteger();
            }
            return null;
        }

        /** '[' values ']', or null if that is not what is at `pos`. */
        private Value[] fastElements(int depth) throws Invalid {
            if (in[pos] != '[') {
                return null;
            }
            pos++;
            space();
            if (pos < in.length && in[pos] == ']') {
                pos++;
                return NO_VALUES;
            }
            List<Value> out = new ArrayList<>();
            while (true) {
                out.add(fast(depth + 1));
                space();
                if (pos >= in.length) {
                    return null;
                }
                byte b = in[pos++];
                if (b == ']') {
                    return out.toArray(new Value[out.size()]);
                }
                if (b != ',') {
                    return null;
                }
                space();
                if (pos >= in.length) {
                    return null;
                }
            }
        }

        private Value fastObject(int depth) throws Invalid {
            pos++;
            space();
            if (pos < in.length && in[pos] == '}') {
                pos++;
                return TupleValue.EmptyTuple;
            }
            List<UniqueString> names = new ArrayList<>();
            List<Value> values = new ArrayList<>();
            boolean record = true;
            while (true) {
                space();
                UniqueString key = fastString();
                space();
                if (key == null || pos >= in.length || in[pos++] != ':') {
                    return null;
                }
                space();
                if (pos >= in.length) {
                    return null;
                }
                if (key.toString().startsWith("#")) {
                    if (!names.isEmpty()) {
                        return null; // a tag with company: the slow path refuses it
                    }
                    Value tagged = fastTagged(key.toString(), depth + 1);
                    space();
                    if (tagged == null || pos >= in.length || in[pos++] != '}') {
                        return null; // not alone, or not a tag: the slow path refuses it
                    }
                    return tagged;
                }
                if (names.contains(key)) {
                    return null;
                }
                names.add(key);
                values.add(fast(depth + 1));
                record &= identifiers.computeIfAbsent(key, k -> Builder.isIdentifier(k.toString()));
                space();
                if (pos >= in.length) {
                    return null;
                }
                byte b = in[pos++];
                if (b == '}') {
                    break;
                }
                if (b != ',') {
                    return null;
                }
            }
            UniqueString[] fields = names.toArray(new UniqueString[names.size()]);
            Value[] vals = values.toArray(new Value[values.size()]);
            if (record) {
                return new RecordValue(fields, vals, false);
            }
            Value[] keys = new Value[fields.length];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = new StringValue(fields[i]);
            }
            return new FcnRcdValue(keys, vals, false);
        }

        /** The body of a #set, #tup or #map; null for anything else. */
        private Value fastTagged(String form, int depth) throws Invalid {
            if (in[pos] != '[') {
                return null;
            }
            if (form.equals("#set") || form.equals("#tup")) {
                Value[] elems = fastElements(depth);
                return elems == null ? null
                        : form.equals("#set") ? new SetEnumValue(elems, false)
                        : Builder.tuple(elems);
            }
            if (!form.equals("#map")) {
                return null;
            }
            pos++;
            space();
            if (pos < in.length && in[pos] == ']') {
                pos++;
                return TupleValue.EmptyTuple;
            }
            List<Value> keys = new ArrayList<>();
            List<Value> values = new ArrayList<>();
            while (true) {
                if (pos >= in.length) {
                    return null;
                }
                Value[] pair = fastElements(depth + 1);
                if (pair == null || pair.length != 2) {
                    return null;
                }
                keys.add(pair[0]);
                values.add(pair[1]);
                space();
                if (pos >= in.length) {
                    return null;
                }
                byte b = in[pos++];
                if (b == ']') {
                    return new FcnRcdValue(keys.toArray(new Value[keys.size()]),
                            values.toArray(new Value[values.size()]), false);
                }
                if (b != ',') {
                    return null;
                }
                space();
            }
        }

        /** A string without escapes, as a name (cached by its bytes); null for anything else. */
        private UniqueString fastString() {
            if (pos >= in.length || in[pos] != '"') {
                return null;
            }
            int start = pos + 1;
            int end = start;
            while (end < in.length && in[end] != '"' && in[end] != '\\'
                    && (in[end] & 0xff) >= 0x20) {
                end++;
            }
            if (end >= in.length || in[end] != '"') {
                return null;
            }
            pos = end + 1;
            return names.name(in, start, end);
        }

        /** A 32-bit integer; null for anything else (the slow path says what is wrong). */
        private Value fastInteger() {
            int start = pos;
            boolean negative = in[pos] == '-';
            int i = negative ? pos + 1 : pos;
            long v = 0;
            int digits = 0;
            while (i < in.length && in[i] >= '0' && in[i] <= '9' && digits <= 10) {
                v = v * 10 + (in[i++] - '0');
                digits++;
            }
            if (digits == 0 || digits > 10
                    || (i < in.length && (in[i] == '.' || in[i] == 'e' || in[i] == 'E'
                            || (in[i] >= '0' && in[i] <= '9')))) {
                return null;
            }
            v = negative ? -v : v;
            if (v != (int) v) {
                return null;
            }
            pos = i;
            return IntValue.gen((int) v);
        }

        private byte peek() throws Invalid {
            if (pos >= in.length) {
                throw error("unexpected end");
            }
            return in[pos];
        }

        private byte next() throws Invalid {
            byte b = peek();
            pos++;
            return b;
        }

        private void expect(char c) throws Invalid {
            if (next() != c) {
                throw error("expected '" + c + "'");
            }
        }
    }
}
