package kreplica.agent;

import net.bytebuddy.asm.Advice;

/**
 * The advice classes: Byte Buddy inlines each method into the hooked Kafka method (so only public
 * types and the public {@link Recorder} may appear here). Arguments are taken as Object and cast
 * in Recorder; every advice suppresses Throwable, so nothing of the agent's reaches Kafka.
 * Which Kafka method each one hooks: {@link Agent#hooks()}.
 */
public final class Hooks {
    private Hooks() {}

    // -- kafka.cluster.Partition --------------------------------------------------------------

    public static final class MakeLeader {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(0) Object partition, @Advice.Argument(1) Object state,
                @Advice.Return Object ret, @Advice.Thrown Throwable thrown) {
            Recorder.makeLeader(partition, state, ret, thrown);
        }
    }

    public static final class MakeFollower {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(0) Object partition, @Advice.Argument(1) Object state,
                @Advice.Return boolean ret, @Advice.Thrown Throwable thrown) {
            Recorder.makeFollower(partition, state, ret, thrown);
        }
    }

    public static final class AppendRecordsToLeader {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(0) Object partition, @Advice.Argument(1) int acks,
                @Advice.Argument(2) Object records, @Advice.Argument(3) Object origin,
                @Advice.Return Object ret, @Advice.Thrown Throwable thrown) {
            Recorder.appendRecordsToLeader(partition, acks, records, origin, ret, thrown);
        }
    }

    public static final class UpdateFollowerFetchState {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object partition, @Advice.Argument(0) int follower,
                @Advice.Argument(1) Object offset, @Advice.Argument(2) long followerStart,
                @Advice.Argument(4) long leaderEnd, @Advice.Return boolean ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.updateFollowerFetchState(partition, follower, offset, followerStart, leaderEnd,
                    ret, thrown);
        }
    }

    public static final class ExpandIsr {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object partition, @Advice.Argument(0) Object newIsr,
                @Advice.FieldValue("zkVersion") int zkVersion, @Advice.Thrown Throwable thrown) {
            Recorder.isrChange("expandIsr", partition, newIsr, zkVersion, thrown);
        }
    }

    public static final class ShrinkIsr {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object partition, @Advice.Argument(0) Object newIsr,
                @Advice.FieldValue("zkVersion") int zkVersion, @Advice.Thrown Throwable thrown) {
            Recorder.isrChange("shrinkIsr", partition, newIsr, zkVersion, thrown);
        }
    }

    public static final class MaybeIncrementLeaderHW {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(0) Object partition, @Advice.Return boolean ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.maybeIncrementLeaderHW(partition, ret, thrown);
        }
    }

    public static final class LastOffsetForLeaderEpoch {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(0) Object partition, @Advice.Argument(1) Object current,
                @Advice.Argument(2) boolean fromLeader, @Advice.Argument(3) int epoch,
                @Advice.Return Object ret, @Advice.Thrown Throwable thrown) {
            Recorder.lastOffsetForLeaderEpoch(partition, current, fromLeader, epoch, ret, thrown);
        }
    }

    // -- the leader's request handling --------------------------------------------------------

    public static final class Request {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.FieldValue("replicaManager") Object replicaManager,
                @Advice.Argument(0) Object request) {
            Recorder.requestEnter(replicaManager, request);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Recorder.requestExit();
        }
    }

    public static final class ReadFromLocalLog {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object replicaManager, @Advice.Argument(0) int replicaId,
                @Advice.Argument(5) Object readInfo, @Advice.Return Object ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.readFromLocalLog(replicaManager, replicaId, readInfo, ret, thrown);
        }
    }

    public static final class DelayedFetchComplete {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.FieldValue("replicaManager") Object replicaManager) {
            Recorder.delayedFetchEnter(replicaManager);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Recorder.delayedFetchExit();
        }
    }

    public static final class DelayedProduceComplete {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.FieldValue("produceMetadata") Object metadata,
                @Advice.FieldValue("replicaManager") Object replicaManager,
                @Advice.Thrown Throwable thrown) {
            Recorder.delayedProduce("delayedProduceComplete", metadata, replicaManager, thrown);
        }
    }

    public static final class DelayedProduceExpire {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.FieldValue("produceMetadata") Object metadata,
                @Advice.FieldValue("replicaManager") Object replicaManager,
                @Advice.Thrown Throwable thrown) {
            Recorder.delayedProduce("delayedProduceExpire", metadata, replicaManager, thrown);
        }
    }

    public static final class CheckpointHighWatermarks {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object replicaManager, @Advice.Thrown Throwable thrown) {
            Recorder.checkpointHighWatermarks(replicaManager, thrown);
        }
    }

    /** OffsetCheckpointFile.write entry: the HW a checkpoint writes (no event of its own). */
    public static final class CheckpointWrite {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(0) Object offsets) {
            Recorder.checkpointWrite(offsets);
        }
    }

    // -- the follower's fetcher ---------------------------------------------------------------

    public static final class BuildFetch {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread,
                @Advice.FieldValue("replicaMgr") Object replicaManager,
                @Advice.Argument(0) Object states, @Advice.Return Object ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.buildFetch(thread, replicaManager, states, ret, thrown);
        }
    }

    public static final class SendRequest {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.FieldValue("sourceBroker") Object sourceBroker,
                @Advice.Argument(0) Object builder, @Advice.Return Object ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.sendRequest(sourceBroker, builder, ret, thrown);
        }
    }

    public static final class ProcessPartitionData {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread,
                @Advice.FieldValue("replicaMgr") Object replicaManager,
                @Advice.Argument(0) Object tp, @Advice.Argument(1) long fetchOffset,
                @Advice.Argument(2) Object data, @Advice.Return Object ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.processPartitionData(thread, replicaManager, tp, fetchOffset, data, ret, thrown);
        }
    }

    public static final class FetchEpochEndOffsets {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object thread,
                @Advice.FieldValue("replicaMgr") Object replicaManager,
                @Advice.Argument(0) Object requested) {
            Recorder.fetchEpochEndOffsetsEnter(thread, replicaManager, requested);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread,
                @Advice.FieldValue("replicaMgr") Object replicaManager,
                @Advice.Argument(0) Object requested, @Advice.Return Object ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.fetchEpochEndOffsetsExit(thread, replicaManager, requested, ret, thrown);
        }
    }

    public static final class Truncate {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread,
                @Advice.FieldValue("replicaMgr") Object replicaManager,
                @Advice.Argument(0) Object tp, @Advice.Argument(1) Object truncation,
                @Advice.Thrown Throwable thrown) {
            Recorder.truncate(thread, replicaManager, tp, truncation, thrown);
        }
    }

    public static final class TruncateFullyAndStartAt {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread,
                @Advice.FieldValue("replicaMgr") Object replicaManager,
                @Advice.Argument(0) Object tp, @Advice.Argument(1) long offset,
                @Advice.Thrown Throwable thrown) {
            Recorder.truncateFullyAndStartAt(thread, replicaManager, tp, offset, thrown);
        }
    }

    public static final class HandlePartitionsWithErrors {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread, @Advice.Argument(0) Object partitions,
                @Advice.Argument(1) String method, @Advice.Thrown Throwable thrown) {
            Recorder.handlePartitionsWithErrors(thread, partitions, method, thrown);
        }
    }

    public static final class OnPartitionFenced {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread, @Advice.Argument(0) Object tp,
                @Advice.Argument(1) Object requestEpoch, @Advice.Return boolean ret,
                @Advice.Thrown Throwable thrown) {
            Recorder.fetcherPartitionError("onPartitionFenced", thread, tp, null, requestEpoch, ret,
                    thrown);
        }
    }

    public static final class HandleOutOfRangeError {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread, @Advice.Argument(0) Object tp,
                @Advice.Argument(1) Object fetchState, @Advice.Argument(2) Object requestEpoch,
                @Advice.Return boolean ret, @Advice.Thrown Throwable thrown) {
            Recorder.fetcherPartitionError("handleOutOfRangeError", thread, tp, fetchState,
                    requestEpoch, ret, thrown);
        }
    }

    public static final class MarkPartitionFailed {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object thread, @Advice.Argument(0) Object tp,
                @Advice.Thrown Throwable thrown) {
            Recorder.fetcherPartitionError("markPartitionFailed", thread, tp, null, null, false,
                    thrown);
        }
    }

    // -- kafka.log.Log and its LeaderEpochFileCache -------------------------------------------

    public static final class LogTruncateTo {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object log, @Advice.Argument(0) long target,
                @Advice.Return boolean ret, @Advice.Thrown Throwable thrown) {
            Recorder.logTruncateTo(log, target, ret, thrown);
        }
    }

    public static final class LogTruncateFullyAndStartAt {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object log, @Advice.Argument(0) long offset,
                @Advice.Thrown Throwable thrown) {
            Recorder.logTruncateFullyAndStartAt(log, offset, thrown);
        }
    }

    public static final class UpdateHighWatermark {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static long enter(@Advice.This Object log) {
            return Recorder.highWatermarkBefore(log);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object log, @Advice.Enter long before,
                @Advice.Argument(0) Object offset, @Advice.Thrown Throwable thrown) {
            Recorder.updateHighWatermark(log, before, offset, thrown);
        }
    }

    public static final class LogFlush {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object log, @Advice.Argument(0) long offset,
                @Advice.Thrown Throwable thrown) {
            Recorder.logFlush(log, offset, thrown);
        }
    }

    public static final class EpochCacheAssign {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static Object enter(@Advice.This Object cache) {
            return Recorder.cacheBefore(cache);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object cache, @Advice.Enter Object before,
                @Advice.Argument(0) int epoch, @Advice.Argument(1) long startOffset,
                @Advice.Thrown Throwable thrown) {
            Recorder.epochCacheAssign(cache, before, epoch, startOffset, thrown);
        }
    }

    public static final class EpochCacheTruncateFromEnd {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object cache, @Advice.Argument(0) long offset,
                @Advice.Thrown Throwable thrown) {
            Recorder.epochCache("epochCacheTruncateFromEnd", cache, offset, thrown);
        }
    }

    public static final class EpochCacheTruncateFromStart {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object cache, @Advice.Argument(0) long offset,
                @Advice.Thrown Throwable thrown) {
            Recorder.epochCache("epochCacheTruncateFromStart", cache, offset, thrown);
        }
    }

    // -- the controller -----------------------------------------------------------------------

    public static final class OnBrokerFailure {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object controller, @Advice.Argument(0) Object brokers) {
            Recorder.controllerBrokers("onBrokerFailure", "enter", controller, brokers, null);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object controller, @Advice.Argument(0) Object brokers,
                @Advice.Thrown Throwable thrown) {
            Recorder.controllerBrokers("onBrokerFailure", "exit", controller, brokers, thrown);
        }
    }

    public static final class OnBrokerStartup {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object controller, @Advice.Argument(0) Object brokers) {
            Recorder.controllerBrokers("onBrokerStartup", "enter", controller, brokers, null);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object controller, @Advice.Argument(0) Object brokers,
                @Advice.Thrown Throwable thrown) {
            Recorder.controllerBrokers("onBrokerStartup", "exit", controller, brokers, thrown);
        }
    }

    public static final class OnControllerFailover {
        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object controller, @Advice.Thrown Throwable thrown) {
            Recorder.controllerBrokers("onControllerFailover", "exit", controller, null, thrown);
        }
    }

    public static final class AddLeaderAndIsrRequest {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.FieldValue("controllerContext") Object context,
                @Advice.Argument(0) Object brokers, @Advice.Argument(1) Object tp,
                @Advice.Argument(2) Object leaderIsr, @Advice.Argument(3) Object assignment,
                @Advice.Argument(4) boolean isNew) {
            Recorder.addLeaderAndIsrRequest(context, brokers, tp, leaderIsr, assignment, isNew);
        }
    }
}
