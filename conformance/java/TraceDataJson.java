/*
 * Reads one ITF trace from its JSON text into the value KafkaReplicationTrace expects of a trace
 * (see the comment at the top of spec/KafkaReplicationTrace.tla):
 *
 *   [hidden |-> names of the spec's variables the trace never records,
 *    events |-> << [e |-> action, a |-> arguments, v |-> recorded variables that changed], ... >>]
 *
 * ITF values become TLC values as kreplica.conformance.itf reads them: numbers are integers
 * (32 bits, as TLC's), arrays and #tup are tuples, #set is a set, #map and objects whose keys
 * are not all identifiers are functions, other objects are records, {} and an empty #map are
 * <<>>, #bigint is an integer.  A variable counts as changed when its JSON text differs from the
 * one in the state before; a reformatted but equal value is merely checked once more.
 *
 * Every state must hold every variable in `vars`, and no other, as kreplica.conformance.itf
 * demands.  With a vocabulary (the spec's variables and each action's argument names) a trace
 * that names anything else is refused, as the Python reader refuses it.  Every refusal is an Invalid
 * exception carrying one line that says why.
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

    private TraceDataJson() {}

    /** A trace the reader refuses, with the reason in one line. */
    static final class Invalid extends Exception {
        private static final long serialVersionUID = 1L;

        Invalid(String message) {
            super(message);
        }
    }

    /** The spec's variables, in the spec's order, and the argument names of each action. */
    static final class Vocabulary {
        final List<String> variables;
        final Map<String, Set<String>> actionArgs;

        Vocabulary(List<String> variables, Map<String, Set<String>> actionArgs) {
            this.variables = variables;
            this.actionArgs = actionArgs;
        }
    }

    /** A parsed JSON value and where its text lies (to tell changed variables cheaply). */
    private static final class Node {
        final Object value; // Map<String, Node>, List<Node>, String, Long, Boolean
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

    /** The trace value of the ITF JSON text in `json` (all of it). */
    static Trace read(byte[] json, Vocabulary vocabulary) throws Invalid {
        Parser parser = new Parser(json);
        Node top = parser.document();
        return new Builder(json, vocabulary).trace(top);
    }

    // ------------------------------------------------------------------ from JSON to a trace

    private static final class Builder {
        private final byte[] text;
        private final Vocabulary vocabulary;

        Builder(byte[] text, Vocabulary vocabulary) {
            this.text = text;
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
            Value[] events = new Value[states.size()];
            Map<String, Node> previous = null;
            for (int i = 0; i < events.length; i++) {
                Map<String, Node> state = object(states.get(i), "state " + i);
                events[i] = event(i, state, previous, observed, vars);
                previous = state;
            }
            Value value = new RecordValue(
                    new UniqueString[] {name("hidden"), name("events")},
                    new Value[] {stringSet(hidden), new TupleValue(events)},
                    false);
            return new Trace(events.length - 1, value);
        }

        private Value event(int index, Map<String, Node> state, Map<String, Node> previous,
                List<String> observed, List<String> declared) throws Invalid {
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
            List<UniqueString> names = new ArrayList<>();
            List<Value> values = new ArrayList<>();
            for (String v : observed) {
                Node now = state.get(v);
                if (now == null) {
                    throw new Invalid("state " + index + ": missing variable '" + v + "'");
                }
                if (previous == null || !sameText(previous.get(v), now)) {
                    names.add(name(v));
                    values.add(convert(now, 0));
                }
            }
            Value args = argsNode == null || isEmptyObject(argsNode)
                    ? TupleValue.EmptyTuple : convert(argsNode, 0);
            Value changed = names.isEmpty() ? TupleValue.EmptyTuple
                    : new RecordValue(names.toArray(new UniqueString[0]),
                            values.toArray(new Value[0]), false);
            UniqueString[] fields = {name("e"), name("a"), name("v")};
            Value[] parts = {new StringValue(action), args, changed};
            return new RecordValue(fields, parts, false);
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

        private boolean sameText(Node a, Node b) {
            return Arrays.equals(text, a.start, a.end, text, b.start, b.end);
        }

        /** The TLC value an ITF JSON value stands for. */
        Value convert(Node node, int depth) throws Invalid {
            if (depth > MAX_DEPTH) {
                throw new Invalid("values nested too deeply");
            }
            Object v = node.value;
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
            if (obj.size() == 1) {
                Map.Entry<String, Node> only = obj.entrySet().iterator().next();
                Value tagged = tagged(only.getKey(), only.getValue(), depth);
                if (tagged != null) {
                    return tagged;
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
        private Value tagged(String form, Node body, int depth) throws Invalid {
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

        private Node bodyArray(String form, Node body) throws Invalid {
            if (!(body.value instanceof List)) {
                throw new Invalid("bad ITF " + form + " value");
            }
            return body;
        }

        private Value map(List<Node> pairs, int depth) throws Invalid {
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

        private Value[] elements(Node node, int depth) throws Invalid {
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
                out.put(key, value(depth + 1));
                space();
                byte b = next();
                if (b == '}') {
                    return out;
                }
                if (b != ',') {
                    throw error("expected ',' or '}'");
                }
            }
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
                pos++;
            }
            if (pos < in.length && in[pos] == '"') {
                return new String(in, start, pos++ - start, StandardCharsets.UTF_8);
            }
            StringBuilder out = new StringBuilder(
                    new String(in, start, pos - start, StandardCharsets.UTF_8));
            while (true) {
                byte b = next();
                if (b == '"') {
                    return out.toString();
                }
                if (b != '\\') {
                    int from = pos - 1;
                    while (pos < in.length && in[pos] != '"' && in[pos] != '\\') {
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
