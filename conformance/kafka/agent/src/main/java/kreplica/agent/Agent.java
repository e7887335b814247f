package kreplica.agent;

import static net.bytebuddy.matcher.ElementMatchers.isDefaultFinalizer;
import static net.bytebuddy.matcher.ElementMatchers.isStatic;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.not;
import static net.bytebuddy.matcher.ElementMatchers.returns;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import java.io.InputStream;
import java.lang.instrument.Instrumentation;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import net.bytebuddy.ByteBuddy;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.ClassFileLocator;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.pool.TypePool;
import net.bytebuddy.utility.JavaModule;

/**
 * kreplica-agent: a Byte Buddy {@code -javaagent} that records a real Apache Kafka 2.6.3 broker's
 * replication steps for one partition (topic "kreplica", partition 0) as JSON lines, so that a run
 * of conformance/kafka (real.py) can be told step by step, with the partition's state after each.
 *
 * <h2>Build and use</h2>
 *
 * <pre>
 * make kafka        # builds build/kafka/agent/kreplica-agent.jar (Maven, conformance/kafka/agent/pom.xml)
 * java -javaagent:build/kafka/agent/kreplica-agent.jar=events=/run/broker-1/events.jsonl,broker=1 \
 *      -cp 'build/kafka/lib/*' kafka.Kafka server.properties
 * </pre>
 *
 * In the harness: {@code ClusterSettings(agent=Path("build/kafka/agent/kreplica-agent.jar"))}
 * (conformance/kafka/cluster.py), or {@code real.run_schedule(..., agent=...)}: each broker's JVM
 * (not ZooKeeper's) then writes {@code events.jsonl} in its directory. The jar holds only this
 * package and Byte Buddy (relocated to {@code kreplica.shaded.bytebuddy}); Kafka's own jars are
 * compiled against ({@code provided}) and never changed. Built with {@code --release 11} (Kafka
 * 2.6.3 runs on Java 11).
 *
 * <p>Options (comma-separated {@code key=value}): {@code events} (the file; required; opened in
 * append mode, so a restarted broker appends after its earlier lines), {@code broker} (the broker
 * id written into every line; required), {@code topic} (default kreplica), {@code partition}
 * (default 0).
 *
 * <h2>Exit codes (in premain, before Kafka's main runs)</h2>
 *
 * <ul>
 *   <li>2: bad options, or the events file cannot be opened (one line on stderr);
 *   <li>3: a hook matches no method in the Kafka on the classpath: one line {@code kreplica-agent:
 *       hook <name> (<class>.<method>) matches no method in this Kafka (<version>); refusing to
 *       run}, then {@code System.exit(3)}. Checked with Byte Buddy's TypePool, which reads the
 *       class files without loading any class, before a transformer is installed: the class, the
 *       method's name, static or not, its parameter and return types, and every field an advice
 *       reads ({@code ... reads field <f>, which this Kafka (<version>) lacks; refusing to run}).
 * </ul>
 *
 * <h2>How it hooks</h2>
 *
 * Every hook is an inlined {@link Advice} (the classes in {@link Hooks}) that calls a static method
 * of {@link Recorder}. Scala 2.13 (Kafka is compiled with inlining) turns a locked section such as
 * {@code inWriteLock(leaderIsrUpdateLock) { ... }} into a synthetic static {@code $anonfun$...}
 * method called while the lock is held: the hooks on those (makeLeader, makeFollower,
 * appendRecordsToLeader, maybeIncrementLeaderHW, lastOffsetForLeaderEpoch) take their time stamp
 * and read the partition's state under that lock. Byte Buddy skips synthetic methods by default;
 * the agent's ByteBuddy ignores only the default finalizer. The agent takes no Kafka lock itself
 * (see Recorder). Exceptions inside a hook never reach Kafka: every advice suppresses Throwable,
 * and Recorder catches it, counts it and writes an {@code agent-error} line.
 *
 * <p>The hooks (name: where; "exit" unless said), see {@link #hooks()}:
 *
 * <ul>
 *   <li>Partition: makeLeader ({@code $anonfun$makeLeader$1}), makeFollower
 *       ({@code $anonfun$makeFollower$1}), appendRecordsToLeader
 *       ({@code $anonfun$appendRecordsToLeader$1}, also on throw), updateFollowerFetchState,
 *       expandIsr, shrinkIsr, maybeIncrementLeaderHW ({@code $anonfun$maybeIncrementLeaderHW$1}),
 *       lastOffsetForLeaderEpoch ({@code $anonfun$lastOffsetForLeaderEpoch$1});
 *   <li>the leader's requests: request (KafkaApis.handle entry and exit: no event, the request's
 *       header is attached to the thread's events), readFromLocalLog (ReplicaManager, follower
 *       fetches only), delayedFetch (DelayedFetch.onComplete entry and exit: no event, marks the
 *       reads it makes), delayedProduceComplete / delayedProduceExpire (DelayedProduce.onComplete /
 *       onExpiration), checkpointHighWatermarks (ReplicaManager), with the HW
 *       OffsetCheckpointFile.write got (checkpointWrite, no event of its own);
 *   <li>the follower's fetcher: buildFetch, processPartitionData, fetchEpochEndOffsets (entry:
 *       event fetchEpochEndOffsetsRequest; exit: fetchEpochEndOffsets), truncate,
 *       truncateFullyAndStartAt (ReplicaFetcherThread), sendRequest (ReplicaFetcherBlockingSend,
 *       also on throw), handlePartitionsWithErrors, onPartitionFenced, handleOutOfRangeError,
 *       markPartitionFailed (AbstractFetcherThread);
 *   <li>the log: logTruncateTo (Log.truncateTo), logTruncateFullyAndStartAt, updateHighWatermark
 *       (Log.updateHighWatermarkMetadata, the one method every HW change goes through; recorded
 *       only when the HW offset changed), logFlush (Log.flush(long)), epochCacheAssign,
 *       epochCacheTruncateFromEnd, epochCacheTruncateFromStart (LeaderEpochFileCache);
 *   <li>the controller: onBrokerFailure, onBrokerStartup (entry and exit), onControllerFailover
 *       (KafkaController), addLeaderAndIsrRequest
 *       (AbstractControllerBrokerRequestBatch.addLeaderAndIsrRequestForBrokers, entry).
 * </ul>
 *
 * <h2>The events file</h2>
 *
 * One JSON object per line, each written whole with one unbuffered write to a file opened in
 * append mode (a kill -9 loses nothing already written). Its kinds and fields: {@link Recorder}.
 */
public final class Agent {
    private Agent() {}

    /** Exit code: bad agent options, or the events file cannot be opened. */
    public static final int EXIT_USAGE = 2;

    /** Exit code: a hook matches no method in the Kafka on the classpath. */
    public static final int EXIT_HOOKS_MISMATCH = 3;

    static final String P = "kafka.cluster.Partition";
    static final String RM = "kafka.server.ReplicaManager";
    static final String RFT = "kafka.server.ReplicaFetcherThread";
    static final String AFT = "kafka.server.AbstractFetcherThread";
    static final String LOG = "kafka.log.Log";
    static final String CACHE = "kafka.server.epoch.LeaderEpochFileCache";
    static final String KC = "kafka.controller.KafkaController";
    static final String TP = "org.apache.kafka.common.TopicPartition";

    /** One hooked method: its name in the events, where it is, what it matches, its advice. */
    static final class Hook {
        final String name;
        final String className;
        final String method;
        final String signature;
        final ElementMatcher<MethodDescription> matcher;
        final Class<?> advice;
        /** Fields of the class the advice reads (@Advice.FieldValue): checked like the method. */
        String[] fields = new String[0];

        Hook(String name, String className, String method, String signature,
                ElementMatcher<MethodDescription> matcher, Class<?> advice) {
            this.name = name;
            this.className = className;
            this.method = method;
            this.signature = signature;
            this.matcher = matcher;
            this.advice = advice;
        }

        Hook reads(String... names) {
            fields = names;
            return this;
        }
    }

    /**
     * A hook on {@code className.method(params) : returnType}, matched exactly: name, static or
     * not, parameter count and erased types, erased return type.
     */
    static Hook hook(String name, String className, boolean staticMethod, String method,
            String returnType, Class<?> advice, String... params) {
        ElementMatcher.Junction<MethodDescription> m = named(method);
        m = m.and(staticMethod ? isStatic() : not(isStatic()));
        m = m.and(takesArguments(params.length)).and(returns(named(returnType)));
        StringBuilder shown = new StringBuilder(method).append('(');
        for (int i = 0; i < params.length; i++) {
            m = m.and(takesArgument(i, named(params[i])));
            if (i > 0) shown.append(", ");
            String simple = params[i].substring(params[i].lastIndexOf('.') + 1);
            shown.append(simple.substring(simple.lastIndexOf('$') + 1));
        }
        shown.append(')');
        return new Hook(name, className, method, shown.toString(), m, advice);
    }

    /** Every hook, in the order the header lists them. */
    static List<Hook> hooks() {
        String lis = "org.apache.kafka.common.message.LeaderAndIsrRequestData$LeaderAndIsrPartitionState";
        String ckpt = "kafka.server.checkpoints.OffsetCheckpoints";
        List<Hook> h = new ArrayList<>();
        // the partition on this broker (leader and follower transitions, the leader's steps)
        h.add(hook("makeLeader", P, true, "$anonfun$makeLeader$1", "scala.Tuple2",
                Hooks.MakeLeader.class, P, lis, ckpt));
        h.add(hook("makeFollower", P, true, "$anonfun$makeFollower$1", "boolean",
                Hooks.MakeFollower.class, P, lis, ckpt));
        h.add(hook("appendRecordsToLeader", P, true, "$anonfun$appendRecordsToLeader$1",
                "scala.Tuple2", Hooks.AppendRecordsToLeader.class,
                P, "int", "org.apache.kafka.common.record.MemoryRecords", "kafka.log.AppendOrigin"));
        h.add(hook("updateFollowerFetchState", P, false, "updateFollowerFetchState", "boolean",
                Hooks.UpdateFollowerFetchState.class,
                "int", "kafka.server.LogOffsetMetadata", "long", "long", "long"));
        h.add(hook("expandIsr", P, false, "expandIsr", "void", Hooks.ExpandIsr.class,
                "scala.collection.immutable.Set").reads("zkVersion"));
        h.add(hook("shrinkIsr", P, false, "shrinkIsr", "void", Hooks.ShrinkIsr.class,
                "scala.collection.immutable.Set").reads("zkVersion"));
        h.add(hook("maybeIncrementLeaderHW", P, true, "$anonfun$maybeIncrementLeaderHW$1", "boolean",
                Hooks.MaybeIncrementLeaderHW.class, P, LOG, "long"));
        h.add(hook("lastOffsetForLeaderEpoch", P, true, "$anonfun$lastOffsetForLeaderEpoch$1",
                "org.apache.kafka.common.requests.EpochEndOffset", Hooks.LastOffsetForLeaderEpoch.class,
                P, "java.util.Optional", "boolean", "int"));
        // the leader's request handling
        h.add(hook("request", "kafka.server.KafkaApis", false, "handle", "void", Hooks.Request.class,
                "kafka.network.RequestChannel$Request").reads("replicaManager"));
        h.add(hook("readFromLocalLog", RM, false, "readFromLocalLog", "scala.collection.Seq",
                Hooks.ReadFromLocalLog.class, "int", "boolean", "kafka.server.FetchIsolation", "int",
                "boolean", "scala.collection.Seq", "kafka.server.ReplicaQuota", "scala.Option"));
        h.add(hook("delayedFetch", "kafka.server.DelayedFetch", false, "onComplete", "void",
                Hooks.DelayedFetchComplete.class).reads("replicaManager"));
        h.add(hook("delayedProduceComplete", "kafka.server.DelayedProduce", false, "onComplete",
                "void", Hooks.DelayedProduceComplete.class).reads("produceMetadata", "replicaManager"));
        h.add(hook("delayedProduceExpire", "kafka.server.DelayedProduce", false, "onExpiration",
                "void", Hooks.DelayedProduceExpire.class).reads("produceMetadata", "replicaManager"));
        h.add(hook("checkpointHighWatermarks", RM, false, "checkpointHighWatermarks", "void",
                Hooks.CheckpointHighWatermarks.class));
        h.add(hook("checkpointWrite", "kafka.server.checkpoints.OffsetCheckpointFile", false,
                "write", "void", Hooks.CheckpointWrite.class, "scala.collection.Map"));
        // the follower's fetcher
        h.add(hook("buildFetch", RFT, false, "buildFetch",
                "kafka.server.AbstractFetcherThread$ResultWithPartitions", Hooks.BuildFetch.class,
                "scala.collection.Map").reads("replicaMgr"));
        h.add(hook("sendRequest", "kafka.server.ReplicaFetcherBlockingSend", false, "sendRequest",
                "org.apache.kafka.clients.ClientResponse", Hooks.SendRequest.class,
                "org.apache.kafka.common.requests.AbstractRequest$Builder").reads("sourceBroker"));
        h.add(hook("processPartitionData", RFT, false, "processPartitionData", "scala.Option",
                Hooks.ProcessPartitionData.class,
                TP, "long", "org.apache.kafka.common.requests.FetchResponse$PartitionData")
                .reads("replicaMgr"));
        h.add(hook("fetchEpochEndOffsets", RFT, false, "fetchEpochEndOffsets", "scala.collection.Map",
                Hooks.FetchEpochEndOffsets.class, "scala.collection.Map").reads("replicaMgr"));
        h.add(hook("truncate", RFT, false, "truncate", "void", Hooks.Truncate.class,
                TP, "kafka.server.OffsetTruncationState").reads("replicaMgr"));
        h.add(hook("truncateFullyAndStartAt", RFT, false, "truncateFullyAndStartAt", "void",
                Hooks.TruncateFullyAndStartAt.class, TP, "long").reads("replicaMgr"));
        h.add(hook("handlePartitionsWithErrors", AFT, false, "handlePartitionsWithErrors", "void",
                Hooks.HandlePartitionsWithErrors.class, "scala.collection.Iterable", "java.lang.String"));
        h.add(hook("onPartitionFenced", AFT, false, "onPartitionFenced", "boolean",
                Hooks.OnPartitionFenced.class, TP, "scala.Option"));
        h.add(hook("handleOutOfRangeError", AFT, false, "handleOutOfRangeError", "boolean",
                Hooks.HandleOutOfRangeError.class, TP, "kafka.server.PartitionFetchState", "scala.Option"));
        h.add(hook("markPartitionFailed", AFT, false, "markPartitionFailed", "void",
                Hooks.MarkPartitionFailed.class, TP));
        // the log and its leader-epoch cache (sub-steps)
        h.add(hook("logTruncateTo", LOG, false, "truncateTo", "boolean", Hooks.LogTruncateTo.class,
                "long"));
        h.add(hook("logTruncateFullyAndStartAt", LOG, false, "truncateFullyAndStartAt", "void",
                Hooks.LogTruncateFullyAndStartAt.class, "long"));
        h.add(hook("updateHighWatermark", LOG, false, "updateHighWatermarkMetadata", "void",
                Hooks.UpdateHighWatermark.class, "kafka.server.LogOffsetMetadata"));
        h.add(hook("logFlush", LOG, false, "flush", "void", Hooks.LogFlush.class, "long"));
        h.add(hook("epochCacheAssign", CACHE, false, "assign", "void", Hooks.EpochCacheAssign.class,
                "int", "long"));
        h.add(hook("epochCacheTruncateFromEnd", CACHE, false, "truncateFromEnd", "void",
                Hooks.EpochCacheTruncateFromEnd.class, "long"));
        h.add(hook("epochCacheTruncateFromStart", CACHE, false, "truncateFromStart", "void",
                Hooks.EpochCacheTruncateFromStart.class, "long"));
        // the controller (in whichever broker is the controller)
        h.add(hook("onBrokerFailure", KC, false, "onBrokerFailure", "void", Hooks.OnBrokerFailure.class,
                "scala.collection.Seq"));
        h.add(hook("onBrokerStartup", KC, false, "onBrokerStartup", "void", Hooks.OnBrokerStartup.class,
                "scala.collection.Seq"));
        h.add(hook("onControllerFailover", KC, false, "onControllerFailover", "void",
                Hooks.OnControllerFailover.class));
        h.add(hook("addLeaderAndIsrRequest", "kafka.controller.AbstractControllerBrokerRequestBatch",
                false, "addLeaderAndIsrRequestForBrokers", "void", Hooks.AddLeaderAndIsrRequest.class,
                "scala.collection.Seq", TP, "kafka.controller.LeaderIsrAndControllerEpoch",
                "kafka.controller.ReplicaAssignment", "boolean").reads("controllerContext"));
        return h;
    }

    /** The Kafka version on the classpath, from kafka-clients' kafka/kafka-version.properties. */
    static String kafkaVersion(ClassLoader loader) {
        try (InputStream in = loader.getResourceAsStream("kafka/kafka-version.properties")) {
            if (in == null) return "unknown";
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("version", "unknown").trim();
        } catch (Exception e) {
            return "unknown";
        }
    }

    /**
     * Why the first hook that does not match the classpath's class files does not (one line for
     * stderr), or null when every hook matches: its method, with that name, static or not, those
     * parameter and return types, and every field its advice reads.
     */
    static String firstMismatch(List<Hook> hooks, ClassLoader loader, String version) {
        TypePool pool = TypePool.Default.of(ClassFileLocator.ForClassLoader.of(loader));
        for (Hook h : hooks) {
            String where = "hook " + h.name + " (" + h.className + "." + h.method + ")";
            String noMethod = "kreplica-agent: " + where + " matches no method in this Kafka ("
                    + version + "); refusing to run";
            TypePool.Resolution found = pool.describe(h.className);
            if (!found.isResolved()) return noMethod;
            try {
                TypeDescription type = found.resolve();
                if (type.getDeclaredMethods().filter(h.matcher).isEmpty()) return noMethod;
                for (String field : h.fields) {
                    if (type.getDeclaredFields().filter(named(field)).isEmpty()) {
                        return "kreplica-agent: " + where + " reads field " + field
                                + ", which this Kafka (" + version + ") lacks; refusing to run";
                    }
                }
            } catch (RuntimeException e) { // a type it names is missing: no match either
                return noMethod;
            }
        }
        return null;
    }

    /** Parse {@code key=value,key=value}. */
    static Map<String, String> options(String args) {
        Map<String, String> out = new LinkedHashMap<>();
        if (args == null) return out;
        for (String part : args.split(",")) {
            if (part.isEmpty()) continue;
            int eq = part.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("option '" + part + "' is not key=value");
            out.put(part.substring(0, eq).trim(), part.substring(eq + 1));
        }
        return out;
    }

    /** The JVM calls this before main: check the hooks, open the file, install the advice. */
    public static void premain(String args, Instrumentation inst) {
        Map<String, String> opts;
        int broker;
        try {
            opts = options(args);
            if (!opts.containsKey("events") || !opts.containsKey("broker")) {
                throw new IllegalArgumentException("events=<file> and broker=<id> are required");
            }
            broker = Integer.parseInt(opts.get("broker"));
        } catch (RuntimeException e) {
            System.err.println("kreplica-agent: bad options '" + args + "': " + e.getMessage());
            System.exit(EXIT_USAGE);
            return;
        }
        ClassLoader loader = ClassLoader.getSystemClassLoader();
        String version = kafkaVersion(loader);
        List<Hook> hooks = hooks();
        String mismatch = firstMismatch(hooks, loader, version);
        if (mismatch != null) {
            System.err.println(mismatch);
            System.err.flush();
            System.exit(EXIT_HOOKS_MISMATCH);
            return;
        }
        try {
            Sink.open(opts.get("events"), broker, opts.getOrDefault("topic", "kreplica"),
                    Integer.parseInt(opts.getOrDefault("partition", "0")), version, hooks);
        } catch (Exception e) {
            System.err.println("kreplica-agent: cannot open the events file " + opts.get("events")
                    + ": " + e);
            System.exit(EXIT_USAGE);
            return;
        }
        install(inst, hooks);
    }

    /** Install one transformer per hooked class; report each class transformed. */
    static void install(Instrumentation inst, List<Hook> hooks) {
        Map<String, List<Hook>> byClass = new LinkedHashMap<>();
        for (Hook h : hooks) byClass.computeIfAbsent(h.className, k -> new ArrayList<>()).add(h);
        Set<String> pending = Collections.newSetFromMap(new ConcurrentHashMap<>());
        pending.addAll(byClass.keySet());
        // Byte Buddy ignores synthetic methods by default, and Scala's $anonfun$ bodies (the
        // locked sections hooked here) are synthetic: ignore only the default finalizer.
        AgentBuilder builder = new AgentBuilder.Default(new ByteBuddy().ignore(isDefaultFinalizer()))
                .disableClassFormatChanges()
                .with(new AgentBuilder.Listener.Adapter() {
                    @Override
                    public void onTransformation(TypeDescription type, ClassLoader loader,
                            JavaModule module, boolean loaded, DynamicType dynamicType) {
                        List<Hook> mine = byClass.get(type.getName());
                        if (mine == null) return;
                        Map<String, Integer> counts = new LinkedHashMap<>();
                        for (Hook h : mine) {
                            counts.put(h.name, type.getDeclaredMethods().filter(h.matcher).size());
                        }
                        pending.remove(type.getName());
                        Sink.transformed(type.getName(), counts, pending.isEmpty());
                    }

                    @Override
                    public void onError(String typeName, ClassLoader loader, JavaModule module,
                            boolean loaded, Throwable error) {
                        Sink.agentError("transform " + typeName, error);
                    }
                });
        for (Map.Entry<String, List<Hook>> entry : byClass.entrySet()) {
            List<Hook> mine = entry.getValue();
            builder = builder.type(named(entry.getKey()))
                    .transform((b, type, classLoader, module, domain) -> {
                        DynamicType.Builder<?> out = b;
                        for (Hook h : mine) out = out.visit(Advice.to(h.advice).on(h.matcher));
                        return out;
                    });
        }
        builder.installOn(inst);
    }

    /** The header's description of the hooks. */
    static List<Object> describe(List<Hook> hooks) {
        List<Object> out = new ArrayList<>();
        Set<String> seen = new LinkedHashSet<>();
        for (Hook h : hooks) {
            if (!seen.add(h.name)) continue;
            Map<String, Object> one = new LinkedHashMap<>();
            one.put("name", h.name);
            one.put("class", h.className);
            one.put("method", h.signature);
            out.add(one);
        }
        return out;
    }
}
