/*
 * Shared prefixes of a batch's traces, for TraceData: each event that several traces begin with
 * alike is walked by TLC once (see the top of spec/KafkaReplicationTrace.tla).
 *
 * The traces make a trie: a node is an event reached by a sequence of events from the first,
 * among traces with the same hidden variables (which decide how an event constrains a state).
 * Two traces reach the same node exactly when they agree on the hidden variables and on every
 * event up to it, action, arguments, recorded values and omitted variables, so the states TLC
 * finds there are the same for both.  Traces are taken in order; each node is held by the first
 * trace that reaches it.  A trace that reaches nodes of earlier traces for its first s events
 * gets s (and, in the holder of its s-th event, it is a kid at that event); one whose events are
 * all held already (a repeat, or a prefix of an earlier trace) is an end (n) in the holder of
 * its last one, and is never walked itself.  A refused trace (TraceData.NEVER_CONFORMS) shares
 * nothing.
 *
 * Prints <<"kreplica-share", number, holder, s>> for each trace with s > 0: its first s events
 * are those of trace `holder` (which holds its s-th), so kreplica knows every trace a printed
 * (trace, step) stands for.  Pinned by tests/test_conform_prefixes.py.
 */

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import tlc2.util.FP64;
import tlc2.value.impl.FcnRcdValue;
import tlc2.value.impl.IntValue;
import tlc2.value.impl.RecordValue;
import tlc2.value.impl.SetEnumValue;
import tlc2.value.impl.TupleValue;
import tlc2.value.impl.Value;
import util.UniqueString;

final class TraceDataPrefixes {
    private TraceDataPrefixes() {}

    /** An edge of the trie: the node before (a root: the hidden variables) and the event. */
    private static final class Edge {
        final long parent;
        final Value event;
        final long fp;

        Edge(long parent, Value event) {
            this.parent = parent;
            this.event = event;
            this.fp = event.fingerPrint(FP64.New());
        }

        @Override
        public int hashCode() {
            return Long.hashCode(parent * 1_000_003L ^ fp);
        }

        @Override
        public boolean equals(Object other) {
            if (!(other instanceof Edge)) {
                return false;
            }
            Edge edge = (Edge) other;
            if (parent != edge.parent || fp != edge.fp) {
                return false;
            }
            try {
                return event.equals(edge.event);
            } catch (RuntimeException e) { // values TLC cannot compare are not the same
                return false;
            }
        }
    }

    private static final long NO_NODE = Long.MIN_VALUE;

    /** The field `name` of a trace's record, or null. */
    private static Value field(RecordValue trace, String name) {
        for (int i = 0; i < trace.names.length; i++) {
            if (trace.names[i].toString().equals(name)) {
                return trace.values[i];
            }
        }
        return null;
    }

    /** A node: trace `holder` (1-based) holds it, as its event `index` (0-based). */
    private static long node(int holder, int index) {
        return ((long) holder << 32) | index;
    }

    /** TraceLog with the sharing fields added (it is returned unchanged if nothing is shared). */
    static Value share(TupleValue traceLog, Set<Integer> refused) {
        Value[] traces = traceLog.elems;
        int count = traces.length;
        Map<Edge, Long> roots = new HashMap<>();
        Map<Edge, Long> nodes = new HashMap<>();
        int[] start = new int[count + 1];
        List<Map<Integer, Set<Integer>>> kids = new ArrayList<>();
        List<Set<Integer>> ends = new ArrayList<>();
        for (int t = 0; t <= count; t++) {
            kids.add(null);
            ends.add(null);
        }
        boolean shared = false;
        for (int number = 1; number <= count; number++) {
            if (refused.contains(number) || !(traces[number - 1] instanceof RecordValue)) {
                continue;
            }
            RecordValue trace = (RecordValue) traces[number - 1];
            Value hidden = field(trace, "hidden");
            Value eventsValue = field(trace, "events");
            if (hidden == null || !(eventsValue instanceof TupleValue)) {
                continue;
            }
            Value[] events = ((TupleValue) eventsValue).elems;
            Edge rootEdge = new Edge(NO_NODE, hidden);
            Long root = roots.get(rootEdge);
            if (root == null) {
                root = (long) -1 - roots.size();
                roots.put(rootEdge, root);
            }
            long at = root;
            int k = 0;
            while (k < events.length) {
                Long next = nodes.get(new Edge(at, events[k]));
                if (next == null) {
                    break;
                }
                at = next;
                k++;
            }
            start[number] = k;
            if (k > 0) {
                shared = true;
                int holder = (int) (at >>> 32);
                int index = (int) at;
                if (k == events.length) {
                    ends.set(holder, add(ends.get(holder), index));
                } else {
                    if (kids.get(holder) == null) {
                        kids.set(holder, new TreeMap<>());
                    }
                    kids.get(holder).computeIfAbsent(index, i -> new TreeSet<>()).add(number);
                }
                System.out.println("<<\"kreplica-share\", " + number + ", " + holder + ", " + k
                        + ">>");
            }
            for (int j = k; j < events.length; j++) {
                long node = node(number, j);
                nodes.put(new Edge(at, events[j]), node);
                at = node;
            }
        }
        if (!shared) {
            return traceLog;
        }
        Value[] out = new Value[count];
        for (int number = 1; number <= count; number++) {
            Value trace = traces[number - 1];
            boolean has = start[number] > 0 || kids.get(number) != null || ends.get(number) != null;
            out[number - 1] = has ? withFields((RecordValue) trace, start[number],
                    kids.get(number), ends.get(number)) : trace;
        }
        return new TupleValue(out);
    }

    private static Set<Integer> add(Set<Integer> set, int index) {
        Set<Integer> out = set == null ? new TreeSet<>() : set;
        out.add(index);
        return out;
    }

    private static Value withFields(RecordValue trace, int start, Map<Integer, Set<Integer>> kids,
            Set<Integer> ends) {
        int n = trace.names.length;
        UniqueString[] names = java.util.Arrays.copyOf(trace.names, n + 3);
        Value[] values = java.util.Arrays.copyOf(trace.values, n + 3);
        names[n] = UniqueString.uniqueStringOf("s");
        values[n] = IntValue.gen(start);
        names[n + 1] = UniqueString.uniqueStringOf("k");
        if (kids == null) {
            values[n + 1] = TupleValue.EmptyTuple;
        } else {
            Value[] keys = new Value[kids.size()];
            Value[] sets = new Value[kids.size()];
            int i = 0;
            for (Map.Entry<Integer, Set<Integer>> entry : kids.entrySet()) {
                keys[i] = IntValue.gen(entry.getKey());
                sets[i] = ints(entry.getValue());
                i++;
            }
            values[n + 1] = new FcnRcdValue(keys, sets, false);
        }
        names[n + 2] = UniqueString.uniqueStringOf("n");
        values[n + 2] = ends == null ? ints(Set.of()) : ints(ends);
        return new RecordValue(names, values, false);
    }

    private static Value ints(Set<Integer> set) {
        Value[] elems = new Value[set.size()];
        int i = 0;
        for (int v : set) {
            elems[i++] = IntValue.gen(v);
        }
        return new SetEnumValue(elems, false);
    }
}
