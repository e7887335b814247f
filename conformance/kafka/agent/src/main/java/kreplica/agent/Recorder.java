package kreplica.agent;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import kafka.api.LeaderAndIsr;
import kafka.cluster.BrokerEndPoint;
import kafka.cluster.Partition;
import kafka.cluster.Replica;
import kafka.controller.ControllerContext;
import kafka.controller.KafkaController;
import kafka.controller.LeaderIsrAndControllerEpoch;
import kafka.controller.ReplicaAssignment;
import kafka.log.Log;
import kafka.log.LogAppendInfo;
import kafka.log.LogSegment;
import kafka.network.RequestChannel;
import kafka.server.AbstractFetcherThread;
import kafka.server.LogOffsetMetadata;
import kafka.server.LogReadResult;
import kafka.server.OffsetTruncationState;
import kafka.server.PartitionFetchState;
import kafka.server.ProduceMetadata;
import kafka.server.ProducePartitionStatus;
import kafka.server.ReplicaManager;
import kafka.server.epoch.EpochEntry;
import kafka.server.epoch.LeaderEpochFileCache;
import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.message.LeaderAndIsrRequestData.LeaderAndIsrPartitionState;
import org.apache.kafka.common.record.BaseRecords;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.Records;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.EpochEndOffset;
import org.apache.kafka.common.requests.FetchRequest;
import org.apache.kafka.common.requests.FetchResponse;
import org.apache.kafka.common.requests.OffsetsForLeaderEpochRequest;
import org.apache.kafka.common.requests.OffsetsForLeaderEpochResponse;
import org.apache.kafka.common.requests.RequestHeader;
import scala.Option;
import scala.Tuple2;

/**
 * What each hook records, and the partition's state read with it.
 *
 * <h2>Lines of the events file (format 1)</h2>
 *
 * Every line is one JSON object with a {@code kind}:
 *
 * <ul>
 *   <li>{@code header}, the first line of each JVM start: {@code agent} "kreplica-agent", {@code
 *       format} 1, {@code kafka} (the version on the classpath, from kafka-clients'
 *       kafka/kafka-version.properties), {@code broker}, {@code pid}, {@code nano}
 *       (System.nanoTime) and {@code wall_ms} (System.currentTimeMillis) of the same moment,
 *       {@code java}, {@code topic}, {@code partition}, {@code hooks} [{name, class, method}].
 *   <li>{@code transformed}: {@code nano, broker, class, hooks} ({name: methods matched}) when a
 *       hooked class is loaded and transformed; {@code hooks-installed}: {@code nano, broker,
 *       hooks} once every hooked class has been (a class Kafka has not loaded yet, such as
 *       DelayedProduce before the first acks=all produce waits, delays it; it may never come).
 *   <li>{@code event}: {@code seq} (per JVM, from 1; taken with {@code nano} when the hook runs,
 *       so lines of different threads may be written slightly out of seq order: sort by seq),
 *       {@code nano} (System.nanoTime at the hook, inside the locked section for the {@code
 *       $anonfun} hooks), {@code broker}, {@code thread}, {@code event} (the hook's name), {@code
 *       args} (below; every key listed is present, null when unknown), {@code state} (below), and
 *       when known: {@code controller} (controller events), {@code request} ({apiKey, clientId,
 *       correlationId} of the request this thread is handling in KafkaApis.handle: the leader's
 *       side, LeaderAndIsr included), {@code response_to} (fetcher threads: {apiKey, clientId,
 *       correlationId} of the request whose response this thread last got from the leader; set by
 *       sendRequest, cleared by buildFetch and fetchEpochEndOffsetsRequest).
 *   <li>{@code agent-error}: {@code nano, broker, thread, hook, error, at, errors} (a hook threw:
 *       swallowed and counted; at most 200 such lines per JVM).
 * </ul>
 *
 * <h2>args per event</h2>
 *
 * {@code error} is always there: the simple name of the exception the hooked method threw, else
 * null (for lastOffsetForLeaderEpoch, readFromLocalLog and fetchEpochEndOffsets: the Errors name
 * of the answer, NONE when fine). Records are [offset, batch partitionLeaderEpoch, value as UTF-8].
 *
 * <ul>
 *   <li>makeLeader: epoch, leader, isr, zkVersion, controllerEpoch, replicas, isNew (the
 *       LeaderAndIsr partition state), hwIncremented, isNewLeader (its return);
 *   <li>makeFollower: epoch, leader, isr, zkVersion, controllerEpoch, replicas, isNew, changed;
 *   <li>appendRecordsToLeader: requiredAcks, origin, firstOffset, lastOffset (null when it threw),
 *       values, records (null when it threw), hwIncremented;
 *   <li>updateFollowerFetchState: follower, fetchOffset, followerLogStart, leaderEndOffset,
 *       updated (its return);
 *   <li>expandIsr, shrinkIsr: newIsr, applied (the partition's ISR is now newIsr: the ZooKeeper
 *       write succeeded), zkVersion;
 *   <li>maybeIncrementLeaderHW: incremented;
 *   <li>lastOffsetForLeaderEpoch: currentLeaderEpoch, requested, fetchOnlyFromLeader, leaderEpoch,
 *       endOffset;
 *   <li>readFromLocalLog (follower fetches only): follower, fetchOffset, currentLeaderEpoch,
 *       followerLogStart, delayed (inside DelayedFetch.onComplete), highWatermark, logStartOffset,
 *       leaderLogEndOffset, records (what the leader read for the follower);
 *   <li>delayedProduceComplete, delayedProduceExpire: requiredAcks, requiredOffset, acksPending,
 *       responseError, baseOffset;
 *   <li>checkpointHighWatermarks: written (the HW the checkpoint file got for our partition,
 *       from OffsetCheckpointFile.write; the state, read after, may hold a newer HW), error;
 *       only while hosted);
 *   <li>buildFetch: leader, fetchOffset, currentLeaderEpoch, fetchState (Fetching / Truncating),
 *       delayed (backing off), inSession, inRequest (in the fetch session / this incremental
 *       request);
 *   <li>sendRequest (every request of the fetcher): apiKey, destination, inRequest (FETCH only),
 *       clientId, correlationId, disconnected, responseError (FETCH only), inResponse,
 *       partitionError, leaderHw (FETCH only);
 *   <li>processPartitionData: leader, fetchOffset, leaderHw, leaderLogStart, count, records,
 *       lastOffset (of the append);
 *   <li>fetchEpochEndOffsetsRequest: leader, requested, currentLeaderEpoch (no error key);
 *   <li>fetchEpochEndOffsets: leader, requested, currentLeaderEpoch, leaderEpoch, endOffset;
 *   <li>truncate: leader, offset, truncationCompleted; truncateFullyAndStartAt: leader, offset;
 *   <li>handlePartitionsWithErrors: leader, method; onPartitionFenced: leader, requestEpoch,
 *       retry; handleOutOfRangeError: leader, requestEpoch, fetchOffset, currentLeaderEpoch,
 *       retry; markPartitionFailed: leader;
 *   <li>logTruncateTo: target, truncated; logTruncateFullyAndStartAt: offset; logFlush: offset;
 *   <li>updateHighWatermark: old (null while the Log is built), hw;
 *   <li>epochCacheAssign: epoch, startOffset, changed; epochCacheTruncateFromEnd,
 *       epochCacheTruncateFromStart: offset;
 *   <li>onBrokerFailure, onBrokerStartup: phase ("enter" / "exit"), brokers; onControllerFailover:
 *       phase ("exit");
 *   <li>addLeaderAndIsrRequest: brokers, leader, leaderEpoch, isr, zkVersion, controllerEpoch,
 *       replicas, isNew (no error key).
 * </ul>
 *
 * {@code controller} (controller events, read on the controller's event thread, which owns it):
 * {@code epoch, live, shuttingDown, leader, leaderEpoch, isr, zkVersion, controllerEpoch} (the
 * last five: the controller's view of our partition, null when it has none).
 *
 * <h2>state</h2>
 *
 * The partition on this broker, read at the hook, after the step: {@code hosted} (a Partition
 * is online in the ReplicaManager), {@code leaderEpoch}, {@code leader} (-1: none), {@code isr}
 * (sorted) — these three null when not hosted — {@code leo}, {@code hw}, {@code logStart}, {@code
 * cache} ([[epoch, startOffset]...] of the leader-epoch cache), {@code log} (every record from
 * logStart to LEO, read from the segments' files; at most 2000), {@code logTruncated} (there
 * were more), {@code remote} ({"id": LEO as this leader knows it} per remote replica; null unless
 * this broker leads) — the log fields null when there is no Log — and {@code logError} only when
 * reading the segments failed (a segment deleted under the reader).
 *
 * <p>Where the Partition is found: the Partition hooks are handed it; every other hook asks the
 * ReplicaManager ({@code nonOfflinePartition}), kept in a static field from the first hook that
 * sees it (KafkaApis.replicaManager at the first request, so before the first LeaderAndIsr;
 * ReplicaManager's own hooks; ReplicaFetcherThread.replicaMgr; DelayedProduce and
 * DelayedFetch.replicaManager); before any ReplicaManager is seen, the last Partition a Partition
 * hook saw. Log and epoch-cache hooks on a Log no Partition holds yet (log recovery at start-up,
 * a Log being created) report that Log's (or cache's) own fields, with {@code hosted} as the
 * ReplicaManager says.
 *
 * <p>No Kafka lock is taken: Partition's fields read here are volatile, so are the Log's
 * offsets; the epoch cache's entries are read under the cache's own read lock (as Kafka's own
 * readers do), the segments' records with positional reads of their files.
 */
public final class Recorder {
    private Recorder() {}

    static final TopicPartition TP = new TopicPartition(Sink.topic, Sink.partition);
    static final String CACHE_IDENT = "[LeaderEpochCache " + TP + "] ";
    static final int LOG_CAP = 2000;

    static volatile ReplicaManager replicaManager;
    static volatile Partition lastPartition;

    static final ThreadLocal<RequestHeader> REQUEST = new ThreadLocal<>();
    static final ThreadLocal<Map<String, Object>> RESPONSE_TO = new ThreadLocal<>();
    static final ThreadLocal<int[]> DELAYED_FETCH = ThreadLocal.withInitial(() -> new int[1]);

    /** One event being recorded: its seq and nano are taken when it is made, at the hook. */
    static final class Event {
        final long nano = System.nanoTime();
        final long seq = Sink.SEQ.incrementAndGet();
        final String name;
        final Map<String, Object> args = new LinkedHashMap<>();
        Map<String, Object> controller;

        Event(String name) {
            this.name = name;
        }

        Event arg(String key, Object value) {
            args.put(key, value);
            return this;
        }
    }

    // -- kafka.cluster.Partition --------------------------------------------------------------

    /** makeLeader: the locked section's exit; args from the LeaderAndIsr partition state. */
    public static void makeLeader(Object partition, Object state, Object ret, Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event("makeLeader");
            lastPartition = p;
            leaderAndIsrArgs(e, (LeaderAndIsrPartitionState) state);
            if (ret instanceof Tuple2) {
                e.arg("hwIncremented", ((Tuple2<?, ?>) ret)._1());
                e.arg("isNewLeader", ((Tuple2<?, ?>) ret)._2());
            }
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("makeLeader", t);
        }
    }

    /** makeFollower: the locked section's exit; {@code changed} is its return. */
    public static void makeFollower(Object partition, Object state, boolean ret, Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event("makeFollower");
            lastPartition = p;
            leaderAndIsrArgs(e, (LeaderAndIsrPartitionState) state);
            e.arg("changed", thrown == null ? ret : null);
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("makeFollower", t);
        }
    }

    static void leaderAndIsrArgs(Event e, LeaderAndIsrPartitionState s) {
        e.arg("epoch", s.leaderEpoch());
        e.arg("leader", s.leader());
        e.arg("isr", new ArrayList<>(s.isr()));
        e.arg("zkVersion", s.zkVersion());
        e.arg("controllerEpoch", s.controllerEpoch());
        e.arg("replicas", new ArrayList<>(s.replicas()));
        e.arg("isNew", s.isNew());
    }

    /** appendRecordsToLeader: the locked section's exit, also when it throws. */
    public static void appendRecordsToLeader(Object partition, int acks, Object records,
            Object origin, Object ret, Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event("appendRecordsToLeader");
            lastPartition = p;
            e.arg("requiredAcks", acks);
            e.arg("origin", String.valueOf(origin));
            Long first = null;
            Long last = null;
            Object hwIncremented = null;
            if (ret instanceof Tuple2) {
                LogAppendInfo info = (LogAppendInfo) ((Tuple2<?, ?>) ret)._1();
                Option<Object> firstOpt = info.firstOffset();
                first = firstOpt.isDefined() ? (Long) firstOpt.get() : null;
                last = info.lastOffset();
                hwIncremented = ((Tuple2<?, ?>) ret)._2();
            }
            e.arg("firstOffset", first);
            e.arg("lastOffset", last);
            List<Object> triples = records((Records) records, Long.MIN_VALUE, Long.MAX_VALUE, null);
            List<Object> values = new ArrayList<>();
            for (Object triple : triples) values.add(((List<?>) triple).get(2));
            e.arg("values", values);
            e.arg("records", thrown == null ? triples : null);
            e.arg("hwIncremented", hwIncremented);
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("appendRecordsToLeader", t);
        }
    }

    /** updateFollowerFetchState (leader): a follower's fetch offset, recorded at exit. */
    public static void updateFollowerFetchState(Object partition, int follower, Object offset,
            long followerStart, long leaderEnd, boolean ret, Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event("updateFollowerFetchState");
            lastPartition = p;
            e.arg("follower", follower);
            e.arg("fetchOffset", ((LogOffsetMetadata) offset).messageOffset());
            e.arg("followerLogStart", followerStart);
            e.arg("leaderEndOffset", leaderEnd);
            e.arg("updated", thrown == null ? ret : null);
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("updateFollowerFetchState", t);
        }
    }

    /** expandIsr / shrinkIsr (under the write lock): the ISR asked for, whether it was applied. */
    public static void isrChange(String name, Object partition, Object newIsr, int zkVersion,
            Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event(name);
            lastPartition = p;
            List<Integer> wanted = sortedInts(newIsr);
            e.arg("newIsr", wanted);
            e.arg("applied", wanted.equals(sortedInts(p.inSyncReplicaIds())));
            e.arg("zkVersion", zkVersion);
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError(name, t);
        }
    }

    /** maybeIncrementLeaderHW: its locked section's exit; {@code incremented} is its return. */
    public static void maybeIncrementLeaderHW(Object partition, boolean ret, Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event("maybeIncrementLeaderHW");
            lastPartition = p;
            e.arg("incremented", thrown == null ? ret : null);
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("maybeIncrementLeaderHW", t);
        }
    }

    /** lastOffsetForLeaderEpoch (leader, an OffsetsForLeaderEpoch request): the answer. */
    public static void lastOffsetForLeaderEpoch(Object partition, Object current,
            boolean fromLeader, int requested, Object ret, Throwable thrown) {
        try {
            Partition p = (Partition) partition;
            if (!TP.equals(p.topicPartition())) return;
            Event e = new Event("lastOffsetForLeaderEpoch");
            lastPartition = p;
            e.arg("currentLeaderEpoch", optionalInt(current));
            e.arg("requested", requested);
            e.arg("fetchOnlyFromLeader", fromLeader);
            EpochEndOffset answer = (EpochEndOffset) ret;
            e.arg("error", answer != null ? answer.error().name() : errorName(thrown));
            e.arg("leaderEpoch", answer != null ? answer.leaderEpoch() : null);
            e.arg("endOffset", answer != null ? answer.endOffset() : null);
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("lastOffsetForLeaderEpoch", t);
        }
    }

    // -- the leader's request handling --------------------------------------------------------

    /** KafkaApis.handle entry: remember the request's header for this thread's events. */
    public static void requestEnter(Object rm, Object request) {
        try {
            remember(rm);
            REQUEST.set(((RequestChannel.Request) request).header());
        } catch (Throwable t) {
            Sink.agentError("request", t);
        }
    }

    /** KafkaApis.handle exit. */
    public static void requestExit() {
        REQUEST.remove();
    }

    /** ReplicaManager.readFromLocalLog for a follower's fetch: what the leader read for it. */
    public static void readFromLocalLog(Object rm, int replicaId, Object readInfo, Object ret,
            Throwable thrown) {
        try {
            remember(rm);
            if (replicaId < 0) return;
            FetchRequest.PartitionData asked = null;
            scala.collection.Iterator<?> it = ((scala.collection.Iterable<?>) readInfo).iterator();
            while (it.hasNext()) {
                Tuple2<?, ?> pair = (Tuple2<?, ?>) it.next();
                if (TP.equals(pair._1())) asked = (FetchRequest.PartitionData) pair._2();
            }
            if (asked == null) return;
            Event e = new Event("readFromLocalLog");
            LogReadResult result = null;
            if (ret != null) {
                it = ((scala.collection.Iterable<?>) ret).iterator();
                while (it.hasNext()) {
                    Tuple2<?, ?> pair = (Tuple2<?, ?>) it.next();
                    if (TP.equals(pair._1())) result = (LogReadResult) pair._2();
                }
            }
            e.arg("follower", replicaId);
            e.arg("fetchOffset", asked.fetchOffset);
            e.arg("currentLeaderEpoch", optionalInt(asked.currentLeaderEpoch));
            e.arg("followerLogStart", asked.logStartOffset);
            e.arg("delayed", DELAYED_FETCH.get()[0] > 0);
            e.arg("error", result != null ? result.error().name() : errorName(thrown));
            e.arg("highWatermark", result != null ? result.highWatermark() : null);
            e.arg("logStartOffset", result != null ? result.leaderLogStartOffset() : null);
            e.arg("leaderLogEndOffset", result != null ? result.leaderLogEndOffset() : null);
            e.arg("records", result != null
                    ? records(result.info().records(), Long.MIN_VALUE, Long.MAX_VALUE, null)
                    : null);
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("readFromLocalLog", t);
        }
    }

    /** DelayedFetch.onComplete entry: the reads it makes are marked {@code delayed}. */
    public static void delayedFetchEnter(Object rm) {
        DELAYED_FETCH.get()[0]++;
        remember(rm);
    }

    /** DelayedFetch.onComplete exit. */
    public static void delayedFetchExit() {
        int[] depth = DELAYED_FETCH.get();
        if (depth[0] > 0) depth[0]--;
    }

    /** DelayedProduce.onComplete / onExpiration exit: the acks=all answer for our partition. */
    public static void delayedProduce(String name, Object metadata, Object rm, Throwable thrown) {
        try {
            remember(rm);
            ProduceMetadata meta = (ProduceMetadata) metadata;
            Option<?> found = meta.produceStatus().get(TP);
            if (!found.isDefined()) return;
            ProducePartitionStatus status = (ProducePartitionStatus) found.get();
            Event e = new Event(name);
            e.arg("requiredAcks", (int) meta.produceRequiredAcks());
            e.arg("requiredOffset", status.requiredOffset());
            e.arg("acksPending", status.acksPending());
            e.arg("responseError", status.responseStatus().error.name());
            e.arg("baseOffset", status.responseStatus().baseOffset);
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError(name, t);
        }
    }

    /** The HW the current thread's checkpoint wrote for our partition (checkpointWrite). */
    static final ThreadLocal<Long> WRITTEN = new ThreadLocal<>();

    /** OffsetCheckpointFile.write entry: remember our partition's HW as written, for the
     *  checkpointHighWatermarks event (the state the hook reads after may hold a newer HW). */
    public static void checkpointWrite(Object offsets) {
        try {
            @SuppressWarnings("unchecked")
            scala.collection.Map<TopicPartition, Object> written =
                    (scala.collection.Map<TopicPartition, Object>) offsets;
            Object found = written.get(TP);
            if (found instanceof Option && ((Option<?>) found).isDefined()) {
                WRITTEN.set(((Number) ((Option<?>) found).get()).longValue());
            }
        } catch (Throwable t) {
            Sink.agentError("checkpointWrite", t);
        }
    }

    /** ReplicaManager.checkpointHighWatermarks exit: the HW written, and the state after. */
    public static void checkpointHighWatermarks(Object rm, Throwable thrown) {
        Long written = WRITTEN.get();
        WRITTEN.remove();
        try {
            remember(rm);
            Partition p = partitionNow();
            if (p == null || !p.log().isDefined()) return;
            Event e = new Event("checkpointHighWatermarks");
            e.arg("written", written);
            e.arg("error", errorName(thrown));
            emit(e, p, null, null);
        } catch (Throwable t) {
            Sink.agentError("checkpointHighWatermarks", t);
        }
    }

    // -- the follower's fetcher ---------------------------------------------------------------

    /** ReplicaFetcherThread.buildFetch exit, when the fetcher holds our partition. */
    public static void buildFetch(Object thread, Object rm, Object states, Object ret,
            Throwable thrown) {
        try {
            remember(rm);
            Option<?> found = lookup(states);
            if (!found.isDefined()) return;
            RESPONSE_TO.remove(); // a new exchange with the leader starts
            Event e = new Event("buildFetch");
            PartitionFetchState state = (PartitionFetchState) found.get();
            e.arg("leader", leaderOf(thread));
            e.arg("fetchOffset", state.fetchOffset());
            e.arg("currentLeaderEpoch", state.currentLeaderEpoch());
            e.arg("fetchState", String.valueOf(state.state()));
            e.arg("delayed", state.isDelayed());
            Boolean inSession = null;
            Boolean inRequest = null;
            if (ret != null) {
                Object fetch = ((AbstractFetcherThread.ResultWithPartitions<?>) ret).result();
                inSession = false;
                inRequest = false;
                if (((Option<?>) fetch).isDefined()) {
                    AbstractFetcherThread.ReplicaFetch f =
                            (AbstractFetcherThread.ReplicaFetch) ((Option<?>) fetch).get();
                    inSession = f.partitionData().containsKey(TP);
                    inRequest = f.fetchRequest().fetchData().containsKey(TP);
                }
            }
            e.arg("inSession", inSession);
            e.arg("inRequest", inRequest);
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("buildFetch", t);
        }
    }

    /** ReplicaFetcherBlockingSend.sendRequest exit (also on throw): one request to the leader. */
    public static void sendRequest(Object sourceBroker, Object builder, Object ret,
            Throwable thrown) {
        try {
            AbstractRequest.Builder<?> request = (AbstractRequest.Builder<?>) builder;
            Event e = new Event("sendRequest");
            e.arg("apiKey", request.apiKey().name());
            e.arg("destination", ((BrokerEndPoint) sourceBroker).id());
            Boolean inRequest = null;
            if (request instanceof FetchRequest.Builder) {
                inRequest = ((FetchRequest.Builder) request).fetchData().containsKey(TP);
            }
            e.arg("inRequest", inRequest);
            ClientResponse response = (ClientResponse) ret;
            Map<String, Object> header = null;
            Object disconnected = null;
            Object responseError = null;
            Boolean inResponse = null;
            Object partitionError = null;
            Object leaderHw = null;
            if (response != null) {
                header = header(response.requestHeader());
                disconnected = response.wasDisconnected();
                AbstractResponse body = response.responseBody();
                if (body instanceof FetchResponse) {
                    FetchResponse<?> fetch = (FetchResponse<?>) body;
                    responseError = fetch.error().name();
                    FetchResponse.PartitionData<?> data = fetch.responseData().get(TP);
                    inResponse = data != null;
                    if (data != null) {
                        partitionError = data.error.name();
                        leaderHw = data.highWatermark;
                    }
                } else if (body instanceof OffsetsForLeaderEpochResponse) {
                    EpochEndOffset end = ((OffsetsForLeaderEpochResponse) body).responses().get(TP);
                    inResponse = end != null;
                    if (end != null) partitionError = end.error().name();
                }
            }
            e.arg("clientId", header != null ? header.get("clientId") : null);
            e.arg("correlationId", header != null ? header.get("correlationId") : null);
            e.arg("disconnected", disconnected);
            e.arg("responseError", responseError);
            e.arg("inResponse", inResponse);
            e.arg("partitionError", partitionError);
            e.arg("leaderHw", leaderHw);
            e.arg("error", errorName(thrown));
            if (header != null) RESPONSE_TO.set(header);
            else RESPONSE_TO.remove();
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("sendRequest", t);
        }
    }

    /** ReplicaFetcherThread.processPartitionData exit (also on throw): records appended. */
    public static void processPartitionData(Object thread, Object rm, Object tp, long fetchOffset,
            Object data, Object ret, Throwable thrown) {
        try {
            remember(rm);
            if (!TP.equals(tp)) return;
            Event e = new Event("processPartitionData");
            FetchResponse.PartitionData<?> d = (FetchResponse.PartitionData<?>) data;
            e.arg("leader", leaderOf(thread));
            e.arg("fetchOffset", fetchOffset);
            e.arg("leaderHw", d.highWatermark);
            e.arg("leaderLogStart", d.logStartOffset);
            List<Object> triples = d.records instanceof Records
                    ? records((Records) d.records, Long.MIN_VALUE, Long.MAX_VALUE, null)
                    : Collections.emptyList();
            e.arg("count", triples.size());
            e.arg("records", triples);
            Object last = null;
            if (ret instanceof Option && ((Option<?>) ret).isDefined()) {
                last = ((LogAppendInfo) ((Option<?>) ret).get()).lastOffset();
            }
            e.arg("lastOffset", last);
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("processPartitionData", t);
        }
    }

    /** ReplicaFetcherThread.fetchEpochEndOffsets entry: the epoch asked for. */
    public static void fetchEpochEndOffsetsEnter(Object thread, Object rm, Object requested) {
        try {
            remember(rm);
            Option<?> found = lookup(requested);
            if (!found.isDefined()) return;
            RESPONSE_TO.remove(); // a new exchange with the leader starts
            Event e = new Event("fetchEpochEndOffsetsRequest");
            OffsetsForLeaderEpochRequest.PartitionData asked =
                    (OffsetsForLeaderEpochRequest.PartitionData) found.get();
            e.arg("leader", leaderOf(thread));
            e.arg("requested", asked.leaderEpoch);
            e.arg("currentLeaderEpoch", optionalInt(asked.currentLeaderEpoch));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("fetchEpochEndOffsetsRequest", t);
        }
    }

    /** ReplicaFetcherThread.fetchEpochEndOffsets exit: the leader's answer (or the error). */
    public static void fetchEpochEndOffsetsExit(Object thread, Object rm, Object requested,
            Object ret, Throwable thrown) {
        try {
            Option<?> found = lookup(requested);
            if (!found.isDefined()) return;
            Event e = new Event("fetchEpochEndOffsets");
            OffsetsForLeaderEpochRequest.PartitionData asked =
                    (OffsetsForLeaderEpochRequest.PartitionData) found.get();
            e.arg("leader", leaderOf(thread));
            e.arg("requested", asked.leaderEpoch);
            e.arg("currentLeaderEpoch", optionalInt(asked.currentLeaderEpoch));
            EpochEndOffset answer = null;
            if (ret != null) {
                Option<?> got = lookup(ret);
                if (got.isDefined()) answer = (EpochEndOffset) got.get();
            }
            e.arg("error", answer != null ? answer.error().name() : errorName(thrown));
            e.arg("leaderEpoch", answer != null ? answer.leaderEpoch() : null);
            e.arg("endOffset", answer != null ? answer.endOffset() : null);
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("fetchEpochEndOffsets", t);
        }
    }

    /** ReplicaFetcherThread.truncate exit: the follower truncated after the epoch exchange. */
    public static void truncate(Object thread, Object rm, Object tp, Object truncation,
            Throwable thrown) {
        try {
            remember(rm);
            if (!TP.equals(tp)) return;
            Event e = new Event("truncate");
            OffsetTruncationState state = (OffsetTruncationState) truncation;
            e.arg("leader", leaderOf(thread));
            e.arg("offset", state.offset());
            e.arg("truncationCompleted", state.truncationCompleted());
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("truncate", t);
        }
    }

    /** ReplicaFetcherThread.truncateFullyAndStartAt exit (an out-of-range fetch). */
    public static void truncateFullyAndStartAt(Object thread, Object rm, Object tp, long offset,
            Throwable thrown) {
        try {
            remember(rm);
            if (!TP.equals(tp)) return;
            Event e = new Event("truncateFullyAndStartAt");
            e.arg("leader", leaderOf(thread));
            e.arg("offset", offset);
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("truncateFullyAndStartAt", t);
        }
    }

    /** AbstractFetcherThread.handlePartitionsWithErrors exit: the partition is backed off. */
    public static void handlePartitionsWithErrors(Object thread, Object partitions, String method,
            Throwable thrown) {
        try {
            boolean ours = false;
            scala.collection.Iterator<?> it = ((scala.collection.Iterable<?>) partitions).iterator();
            while (it.hasNext()) ours |= TP.equals(it.next());
            if (!ours) return;
            Event e = new Event("handlePartitionsWithErrors");
            e.arg("leader", leaderOf(thread));
            e.arg("method", method);
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("handlePartitionsWithErrors", t);
        }
    }

    /** onPartitionFenced / handleOutOfRangeError / markPartitionFailed exit. */
    public static void fetcherPartitionError(String name, Object thread, Object tp,
            Object fetchState, Object requestEpoch, boolean ret, Throwable thrown) {
        try {
            if (!TP.equals(tp)) return;
            Event e = new Event(name);
            e.arg("leader", leaderOf(thread));
            boolean failed = name.equals("markPartitionFailed");
            if (!failed) {
                Option<?> epoch = (Option<?>) requestEpoch;
                e.arg("requestEpoch", epoch != null && epoch.isDefined() ? epoch.get() : null);
            }
            if (fetchState != null) {
                PartitionFetchState state = (PartitionFetchState) fetchState;
                e.arg("fetchOffset", state.fetchOffset());
                e.arg("currentLeaderEpoch", state.currentLeaderEpoch());
            }
            if (!failed) e.arg("retry", thrown == null ? ret : null);
            e.arg("error", errorName(thrown));
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError(name, t);
        }
    }

    // -- kafka.log.Log and its LeaderEpochFileCache -------------------------------------------

    /** Log.truncateTo exit: {@code truncated} is its return. */
    public static void logTruncateTo(Object log, long target, boolean ret, Throwable thrown) {
        try {
            Log l = (Log) log;
            if (!TP.equals(l.topicPartition())) return;
            Event e = new Event("logTruncateTo");
            e.arg("target", target);
            e.arg("truncated", thrown == null ? ret : null);
            e.arg("error", errorName(thrown));
            emit(e, null, l, null);
        } catch (Throwable t) {
            Sink.agentError("logTruncateTo", t);
        }
    }

    /** Log.truncateFullyAndStartAt exit. */
    public static void logTruncateFullyAndStartAt(Object log, long offset, Throwable thrown) {
        try {
            Log l = (Log) log;
            if (!TP.equals(l.topicPartition())) return;
            Event e = new Event("logTruncateFullyAndStartAt");
            e.arg("offset", offset);
            e.arg("error", errorName(thrown));
            emit(e, null, l, null);
        } catch (Throwable t) {
            Sink.agentError("logTruncateFullyAndStartAt", t);
        }
    }

    /** Log.updateHighWatermarkMetadata entry: the HW before (Long.MIN_VALUE: not ours). */
    public static long highWatermarkBefore(Object log) {
        try {
            Log l = (Log) log;
            if (!TP.equals(l.topicPartition())) return Long.MIN_VALUE;
            return l.highWatermark();
        } catch (Throwable t) {
            return Long.MIN_VALUE + 1; // ours, but no HW yet (the Log is being built)
        }
    }

    /** Log.updateHighWatermarkMetadata exit: recorded only when the HW offset changed. */
    public static void updateHighWatermark(Object log, long before, Object offset,
            Throwable thrown) {
        try {
            if (before == Long.MIN_VALUE) return;
            Log l = (Log) log;
            long hw = ((LogOffsetMetadata) offset).messageOffset();
            if (thrown == null && hw == before) return;
            Event e = new Event("updateHighWatermark");
            e.arg("old", before == Long.MIN_VALUE + 1 ? null : before);
            e.arg("hw", hw);
            e.arg("error", errorName(thrown));
            emit(e, null, l, null);
        } catch (Throwable t) {
            Sink.agentError("updateHighWatermark", t);
        }
    }

    /** Log.flush(offset) exit. */
    public static void logFlush(Object log, long offset, Throwable thrown) {
        try {
            Log l = (Log) log;
            if (!TP.equals(l.topicPartition())) return;
            Event e = new Event("logFlush");
            e.arg("offset", offset);
            e.arg("error", errorName(thrown));
            emit(e, null, l, null);
        } catch (Throwable t) {
            Sink.agentError("logFlush", t);
        }
    }

    /** LeaderEpochFileCache.assign entry: the entries before (null: not our partition's). */
    public static Object cacheBefore(Object cache) {
        try {
            LeaderEpochFileCache c = (LeaderEpochFileCache) cache;
            return CACHE_IDENT.equals(c.logIdent()) ? cacheEntries(c) : null;
        } catch (Throwable t) {
            Sink.agentError("epochCacheAssign", t);
            return null;
        }
    }

    /**
     * LeaderEpochFileCache.assign exit; {@code changed}: whether the entries differ from before
     * (most calls, one per appended batch, change nothing).
     */
    public static void epochCacheAssign(Object cache, Object before, int epoch, long startOffset,
            Throwable thrown) {
        try {
            if (before == null) return;
            LeaderEpochFileCache c = (LeaderEpochFileCache) cache;
            Event e = new Event("epochCacheAssign");
            e.arg("epoch", epoch);
            e.arg("startOffset", startOffset);
            e.arg("changed", !before.equals(cacheEntries(c)));
            e.arg("error", errorName(thrown));
            emit(e, null, null, c);
        } catch (Throwable t) {
            Sink.agentError("epochCacheAssign", t);
        }
    }

    /** LeaderEpochFileCache.truncateFromEnd / truncateFromStart exit. */
    public static void epochCache(String name, Object cache, long offset, Throwable thrown) {
        try {
            LeaderEpochFileCache c = (LeaderEpochFileCache) cache;
            if (!CACHE_IDENT.equals(c.logIdent())) return;
            Event e = new Event(name);
            e.arg("offset", offset);
            e.arg("error", errorName(thrown));
            emit(e, null, null, c);
        } catch (Throwable t) {
            Sink.agentError(name, t);
        }
    }

    // -- the controller -----------------------------------------------------------------------

    /** KafkaController.onBrokerFailure / onBrokerStartup (enter, exit), onControllerFailover. */
    public static void controllerBrokers(String name, String phase, Object controller,
            Object brokers, Throwable thrown) {
        try {
            Event e = new Event(name);
            e.arg("phase", phase);
            if (brokers != null) e.arg("brokers", ints(brokers));
            e.arg("error", errorName(thrown));
            e.controller = controllerState(((KafkaController) controller).controllerContext());
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError(name, t);
        }
    }

    /** AbstractControllerBrokerRequestBatch.addLeaderAndIsrRequestForBrokers entry. */
    public static void addLeaderAndIsrRequest(Object context, Object brokers, Object tp,
            Object leaderIsr, Object assignment, boolean isNew) {
        try {
            if (!TP.equals(tp)) return;
            Event e = new Event("addLeaderAndIsrRequest");
            LeaderIsrAndControllerEpoch decided = (LeaderIsrAndControllerEpoch) leaderIsr;
            LeaderAndIsr l = decided.leaderAndIsr();
            e.arg("brokers", ints(brokers));
            e.arg("leader", l.leader());
            e.arg("leaderEpoch", l.leaderEpoch());
            e.arg("isr", ints(l.isr()));
            e.arg("zkVersion", l.zkVersion());
            e.arg("controllerEpoch", decided.controllerEpoch());
            e.arg("replicas", ints(((ReplicaAssignment) assignment).replicas()));
            e.arg("isNew", isNew);
            e.controller = controllerState((ControllerContext) context);
            emit(e, null, null, null);
        } catch (Throwable t) {
            Sink.agentError("addLeaderAndIsrRequest", t);
        }
    }

    /** The controller's view (read on the controller's own event thread, where it lives). */
    static Map<String, Object> controllerState(ControllerContext ctx) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("epoch", ctx.epoch());
        m.put("live", sortedInts(ctx.liveBrokerIds()));
        m.put("shuttingDown", sortedInts(ctx.shuttingDownBrokerIds()));
        Option<?> found = ctx.partitionLeadershipInfo().get(TP);
        if (found.isDefined()) {
            LeaderIsrAndControllerEpoch info = (LeaderIsrAndControllerEpoch) found.get();
            LeaderAndIsr l = info.leaderAndIsr();
            m.put("leader", l.leader());
            m.put("leaderEpoch", l.leaderEpoch());
            m.put("isr", ints(l.isr()));
            m.put("zkVersion", l.zkVersion());
            m.put("controllerEpoch", info.controllerEpoch());
        } else {
            m.put("leader", null);
            m.put("leaderEpoch", null);
            m.put("isr", null);
            m.put("zkVersion", null);
            m.put("controllerEpoch", null);
        }
        return m;
    }

    // -- the event line -----------------------------------------------------------------------

    /**
     * Write the event with the state: of {@code p} if given, else the partition the
     * ReplicaManager holds; {@code log} / {@code cache}: the hook's own, used when no Partition
     * holds a Log yet.
     */
    static void emit(Event e, Partition p, Log log, LeaderEpochFileCache cache) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("kind", "event");
        line.put("seq", e.seq);
        line.put("nano", e.nano);
        line.put("broker", Sink.broker);
        line.put("thread", Thread.currentThread().getName());
        line.put("event", e.name);
        line.put("args", e.args);
        line.put("state", state(p != null ? p : partitionNow(), log, cache));
        if (e.controller != null) line.put("controller", e.controller);
        RequestHeader request = REQUEST.get();
        if (request != null) line.put("request", header(request));
        Map<String, Object> responseTo = RESPONSE_TO.get();
        if (responseTo != null) line.put("response_to", responseTo);
        Sink.line(line);
    }

    static Map<String, Object> header(RequestHeader h) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("apiKey", h.apiKey().name());
        m.put("clientId", h.clientId());
        m.put("correlationId", h.correlationId());
        return m;
    }

    /** The partition's state on this broker (see the class comment). */
    static Map<String, Object> state(Partition p, Log hookLog, LeaderEpochFileCache hookCache) {
        Map<String, Object> m = new LinkedHashMap<>();
        Log log = null;
        m.put("hosted", p != null);
        if (p != null) {
            m.put("leaderEpoch", p.getLeaderEpoch());
            Option<Object> leader = p.leaderReplicaIdOpt();
            m.put("leader", leader.isDefined() ? leader.get() : -1);
            m.put("isr", sortedInts(p.inSyncReplicaIds()));
            Option<Log> own = p.log();
            if (own.isDefined()) log = own.get();
        } else {
            m.put("leaderEpoch", null);
            m.put("leader", null);
            m.put("isr", null);
        }
        if (log == null) log = hookLog;
        if (log == null) {
            m.put("leo", null);
            m.put("hw", null);
            m.put("logStart", null);
            m.put("cache", hookCache != null ? cacheEntries(hookCache) : null);
            m.put("log", null);
            m.put("logTruncated", false);
        } else {
            long leo = log.logEndOffset();
            long logStart = log.logStartOffset();
            m.put("leo", leo);
            m.put("hw", log.highWatermark());
            m.put("logStart", logStart);
            Option<LeaderEpochFileCache> cache = log.leaderEpochCache();
            m.put("cache", cache != null && cache.isDefined() ? cacheEntries(cache.get())
                    : hookCache != null ? cacheEntries(hookCache) : null);
            boolean[] truncated = new boolean[1];
            try {
                m.put("log", logRecords(log, logStart, leo, truncated));
            } catch (Throwable t) {
                m.put("log", null);
                m.put("logError", String.valueOf(t));
            }
            m.put("logTruncated", truncated[0]);
        }
        Map<String, Object> remote = null;
        if (p != null && p.isLeader()) {
            remote = new TreeMap<>();
            scala.collection.Iterator<Replica> it = p.remoteReplicas().iterator();
            while (it.hasNext()) {
                Replica r = it.next();
                remote.put(String.valueOf(r.brokerId()), r.logEndOffset());
            }
        }
        m.put("remote", remote);
        return m;
    }

    static List<Object> cacheEntries(LeaderEpochFileCache cache) {
        List<Object> out = new ArrayList<>();
        scala.collection.Iterator<EpochEntry> it = cache.epochEntries().iterator();
        while (it.hasNext()) {
            EpochEntry entry = it.next();
            out.add(Arrays.asList(entry.epoch(), entry.startOffset()));
        }
        return out;
    }

    /** Every record of the log in [from, to), from its segments' files, at most LOG_CAP. */
    static List<Object> logRecords(Log log, long from, long to, boolean[] truncated) {
        List<Object> out = new ArrayList<>();
        scala.collection.Iterator<LogSegment> it = log.logSegments().iterator();
        while (it.hasNext() && !truncated[0]) {
            LogSegment segment = it.next();
            FileRecords file = segment.log();
            List<Object> some = records(file, from, to, truncated, LOG_CAP - out.size());
            out.addAll(some);
        }
        return out;
    }

    static List<Object> records(BaseRecords records, long from, long to, boolean[] truncated) {
        return records(records, from, to, truncated, Integer.MAX_VALUE);
    }

    /** [offset, batch partitionLeaderEpoch, value] of each record in [from, to), at most cap. */
    static List<Object> records(BaseRecords records, long from, long to, boolean[] truncated,
            int cap) {
        List<Object> out = new ArrayList<>();
        if (!(records instanceof Records)) return out;
        for (RecordBatch batch : ((Records) records).batches()) {
            if (batch.baseOffset() >= to) break;
            if (batch.lastOffset() < from) continue;
            int epoch = batch.partitionLeaderEpoch();
            for (Record record : batch) {
                long offset = record.offset();
                if (offset >= to) break;
                if (offset < from) continue;
                if (out.size() >= cap) {
                    if (truncated != null) truncated[0] = true;
                    return out;
                }
                out.add(Arrays.asList(offset, epoch, value(record)));
            }
        }
        return out;
    }

    static String value(Record record) {
        if (!record.hasValue()) return null;
        ByteBuffer buffer = record.value().duplicate();
        byte[] bytes = new byte[buffer.remaining()];
        buffer.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    // -- helpers ------------------------------------------------------------------------------

    /** The Partition for our topic-partition now (null: not hosted online). */
    static Partition partitionNow() {
        ReplicaManager rm = replicaManager;
        if (rm != null) {
            Option<Partition> found = rm.nonOfflinePartition(TP);
            return found.isDefined() ? found.get() : null;
        }
        return lastPartition;
    }

    /** A Scala Map's value for our topic-partition, as an Option. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static Option<?> lookup(Object map) {
        return ((scala.collection.Map) map).get(TP);
    }

    static void remember(Object rm) {
        if (rm != null && replicaManager == null) replicaManager = (ReplicaManager) rm;
    }

    static Integer leaderOf(Object thread) {
        return ((AbstractFetcherThread) thread).sourceBroker().id();
    }

    static String errorName(Throwable thrown) {
        return thrown == null ? null : thrown.getClass().getSimpleName();
    }

    static Integer optionalInt(Object optional) {
        if (!(optional instanceof Optional)) return null;
        Optional<?> o = (Optional<?>) optional;
        return o.isPresent() ? (Integer) o.get() : null;
    }

    /** A Scala collection of boxed ints, in its order. */
    static List<Integer> ints(Object collection) {
        List<Integer> out = new ArrayList<>();
        scala.collection.Iterator<?> it = ((scala.collection.IterableOnce<?>) collection).iterator();
        while (it.hasNext()) out.add((Integer) it.next());
        return out;
    }

    static List<Integer> sortedInts(Object collection) {
        List<Integer> out = ints(collection);
        Collections.sort(out);
        return out;
    }
}
