/*
 * A Java override of the TLA+ module TraceAgreement for TLC (tla2tools 2.15): AllAgree, the
 * rule KafkaReplicationTrace applies to every step, evaluated in Java.  The definition in
 * spec/TraceAgreement.tla is the reference; this computes the same value, with two savings:
 * no interpretation of the 23 comparisons, and an unchanged variable (the action left the very
 * same value in place) is recognised by identity before its value is compared.
 */

import tlc2.output.EC;
import tlc2.tool.EvalException;
import tlc2.value.impl.BoolValue;
import tlc2.value.impl.RecordValue;
import tlc2.value.impl.StringValue;
import tlc2.value.impl.TupleValue;
import tlc2.value.impl.Value;
import util.UniqueString;

public final class TraceAgreement {
    private TraceAgreement() {}

    /** AllAgree(names, now, before, recorded, unobserved), as spec/TraceAgreement.tla defines it. */
    public static Value AllAgree(Value names, Value now, Value before, Value recorded,
            Value unobserved) {
        Value[] n = elements(names, "names");
        Value[] after = elements(now, "now");
        Value[] prior = elements(before, "before");
        if (after.length != n.length || prior.length != n.length) {
            throw fail("names, now and before differ in length");
        }
        RecordValue logged = record(recorded);
        for (int i = 0; i < n.length; i++) {
            if (!(n[i] instanceof StringValue)) {
                throw fail("a name is not a string");
            }
            Value value = logged == null ? null : field(logged, ((StringValue) n[i]).val);
            boolean agrees = value != null ? same(after[i], value)
                    : unobserved.member(n[i]) || same(after[i], prior[i]);
            if (!agrees) {
                return BoolValue.ValFalse;
            }
        }
        return BoolValue.ValTrue;
    }

    private static boolean same(Value a, Value b) {
        return a == b || a.equals(b);
    }

    private static Value[] elements(Value v, String what) {
        Value t = v instanceof TupleValue ? v : v.toTuple();
        if (!(t instanceof TupleValue)) {
            throw fail(what + " is not a tuple");
        }
        return ((TupleValue) t).elems;
    }

    /** The recorded variables as a record; null when there are none (<<>>). */
    private static RecordValue record(Value v) {
        if (v instanceof RecordValue) {
            return (RecordValue) v;
        }
        if (v instanceof TupleValue && ((TupleValue) v).elems.length == 0) {
            return null;
        }
        Value r = v.toRcd();
        if (!(r instanceof RecordValue)) {
            throw fail("recorded is not a record");
        }
        return (RecordValue) r;
    }

    private static Value field(RecordValue r, UniqueString name) {
        for (int i = 0; i < r.names.length; i++) {
            if (r.names[i] == name) {
                return r.values[i];
            }
        }
        return null;
    }

    private static EvalException fail(String message) {
        return new EvalException(EC.GENERAL, "TraceAgreement!AllAgree: " + message);
    }
}
