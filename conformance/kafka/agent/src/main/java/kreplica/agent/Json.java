package kreplica.agent;

import java.util.Collection;
import java.util.Map;

/**
 * A tiny JSON writer: no library is assumed on Kafka's classpath for the agent's own use.
 *
 * <p>Values: null, Boolean, Number (NaN and infinities as null), CharSequence, Map (keys as
 * strings, in the map's order), Collection, int[] and long[], and {@link Raw} (already JSON).
 * Anything else is written as its toString().
 */
public final class Json {
    private Json() {}

    /** Text that is already JSON, written as it is. */
    public static final class Raw {
        final String json;

        public Raw(String json) {
            this.json = json;
        }
    }

    /** The JSON text of a value. */
    public static String write(Object value) {
        StringBuilder out = new StringBuilder(256);
        append(out, value);
        return out.toString();
    }

    /** Append a value's JSON text. */
    public static void append(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Raw) {
            out.append(((Raw) value).json);
        } else if (value instanceof Boolean) {
            out.append(((Boolean) value).booleanValue() ? "true" : "false");
        } else if (value instanceof Double || value instanceof Float) {
            double d = ((Number) value).doubleValue();
            out.append(Double.isNaN(d) || Double.isInfinite(d) ? "null" : Double.toString(d));
        } else if (value instanceof Number) {
            out.append(value.toString());
        } else if (value instanceof CharSequence) {
            string(out, value.toString());
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (!first) out.append(',');
                first = false;
                string(out, String.valueOf(e.getKey()));
                out.append(':');
                append(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection) {
            out.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) value) {
                if (!first) out.append(',');
                first = false;
                append(out, item);
            }
            out.append(']');
        } else if (value instanceof int[]) {
            out.append('[');
            int[] items = (int[]) value;
            for (int i = 0; i < items.length; i++) {
                if (i > 0) out.append(',');
                out.append(items[i]);
            }
            out.append(']');
        } else if (value instanceof long[]) {
            out.append('[');
            long[] items = (long[]) value;
            for (int i = 0; i < items.length; i++) {
                if (i > 0) out.append(',');
                out.append(items[i]);
            }
            out.append(']');
        } else {
            string(out, value.toString());
        }
    }

    /** Append a JSON string literal. */
    public static void string(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == 0x2028 || c == 0x2029 || Character.isSurrogate(c)) {
                        if (Character.isHighSurrogate(c)
                                && i + 1 < s.length()
                                && Character.isLowSurrogate(s.charAt(i + 1))) {
                            out.append(c).append(s.charAt(++i));
                        } else {
                            out.append(String.format("\\u%04x", (int) c));
                        }
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
