-------------------------- MODULE KafkaReplication --------------------------
(***************************************************************************)
(* One Kafka partition replicated on a few brokers, with a controller:     *)
(* the high watermark (HW) and log end offset (LEO), leader-epoch          *)
(* truncation, and the acks=-1 commit rule, as in Kafka 2.6.3.             *)
(*                                                                         *)
(* Offsets are 0-based: the record at offset o is log[r][o + 1], and       *)
(* LEO(r) = Len(log[r]).  The offsets below a log's start offset hold the  *)
(* entry Deleted, so LogStart(r) counts them.  Rule numbers (R1..R17) and  *)
(* scenarios (S1..S14) are explained in docs/kafka-rules.md.  Every action *)
(* is one step of the implementation (kreplica.impl); its name and         *)
(* arguments are recorded in the variable `action`, which traces carry as  *)
(* each state's #meta.                                                     *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    \* @type: Set(Int);
    Replicas,             \* broker ids, positive integers
    \* @type: Int;
    MaxRecords,           \* producers send records 1..MaxRecords
    \* @type: Int;
    MaxEpoch,             \* the controller elects at most up to this leader epoch
    \* @type: Int;
    MaxCrashes,           \* process crashes (the log survives)
    \* @type: Int;
    MaxUncleanShutdowns,  \* power losses (the log above the recovery point is lost)
    \* @type: Int;
    MaxFetchRecords,      \* replica.fetch.max.bytes, counted in records
    \* @type: Int;
    MinIsr,               \* min.insync.replicas
    \* @type: Str;
    Truncation,           \* "kip279" | "kip101" | "hw" (registry: truncation)
    \* @type: Str;
    Election,             \* "clean" | "unclean"     (registry: election)
    \* @type: Str;
    Acks,                 \* "-1" | "1" (1: acks=1 allowed)  (registry: acks)
    \* @type: Str;
    Fencing,              \* "kip320" | "off"        (registry: fencing)
    \* @type: Set(Str);
    Bugs,                 \* seeded bugs, names from the registry
    \* @type: Bool;
    LossyNetwork,         \* may the network drop messages (and fetchers time out)?
    \* @type: Bool;
    DuplicatingNetwork,   \* may the network deliver a message more than once?
    \* @type: Bool;
    FireAndForget,        \* may producers also send acks=0 (no answer at all)?
    \* @type: Bool;
    RecordDeletion,       \* may clients delete records below the HW (DeleteRecords)?
    \* @type: Bool;
    LogDirFailures,       \* may a broker's log dir fail (its only one: it halts; a crash)?
    \* @type: Bool;
    ControlledShutdowns,  \* may a broker shut down cleanly (SIGTERM: leadership moved first)?
    \* @type: Bool;
    DeposedLeaderHwRace   \* may a leader deposed amid a fetch raise its HW (2.6.3, R21)?

ASSUME Truncation \in {"kip279", "kip101", "hw"}
ASSUME Election \in {"clean", "unclean"}
ASSUME Acks \in {"-1", "1"}
ASSUME Fencing \in {"kip320", "off"}
ASSUME Bugs \subseteq {"early-ack", "hw-from-non-isr", "no-leso-guard",
                       "skip-same-leader-truncation", "hw-not-clamped", "kafka-10706"}

NoLeader == -1     \* a replica that knows no leader
NoEpoch == -1      \* leaderEpoch of a Partition that has accepted no leader epoch yet
NotHosted == -2    \* leaderEpoch of a broker that hosts no Partition (stopped, or restarted
                   \* and reached by no LeaderAndIsr since)
Undefined == -1    \* UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET
Controller == 0    \* the sender of LeaderAndIsr
Deleted == [epoch |-> Undefined, record |-> 0]
                   \* the entry at an offset below a log's start offset: its record is gone

(* @typeAlias: ENTRY = {epoch: Int, record: Int};                          *)
(* @typeAlias: CACHEENTRY = {epoch: Int, startOffset: Int};                *)
(* Messages are records whose `type` field says which fields they carry.    *)
(* Requests carry the sender's incarnation `inc` (the life of the connection *)
(* their answer travels on):                                                *)
(*   FetchRequest{src,dst,inc,epoch,offset}                                 *)
(*   FetchResponse{src,dst,epoch,offset,error,entries,hw,logStart}          *)
(*   OffsetsForLeaderEpochRequest{src,dst,inc,epoch,requested}              *)
(*   OffsetsForLeaderEpochResponse{src,dst,epoch,requested,error,           *)
(*                                 leaderEpoch,endOffset}                   *)
(*   ListOffsetsRequest{src,dst,inc,epoch,timestamp}                        *)
(*   ListOffsetsResponse{src,dst,epoch,error,offset,timestamp}              *)
(*   LeaderAndIsr{src,dst,epoch,leader,isr}                                 *)

VARIABLES
    \* --- per replica (the broker's Log, LeaderEpochFileCache and Partition) ---
    \* @type: Int -> Seq(ENTRY);
    log,            \* the replica's log: one entry (epoch, record id) per offset, Deleted
                    \* below its log start offset (checkpointed: survives a crash)
    \* @type: Int -> Int;
    hw,             \* its high watermark, in memory
    \* @type: Int -> Int;
    hwCheckpoint,   \* the HW in its replication-offset-checkpoint file: what a restart reads
    \* @type: Int -> Seq(CACHEENTRY);
    epochCache,     \* its leader-epoch cache: (epoch, start offset), ascending
    \* @type: Int -> Int;
    recoveryPoint,  \* its flushed offset: an unclean shutdown keeps log below it
    \* @type: Int -> Int;
    leaderEpoch,    \* the leader epoch it last accepted from LeaderAndIsr (or NoEpoch, NotHosted)
    \* @type: Int -> Int;
    leader,         \* the leader it follows, itself when it leads, or NoLeader
    \* @type: Int -> Str;
    fetchState,     \* its fetcher: "Idle" | "Truncating" | "Fetching" | "Failed"
    \* @type: Int -> Set(Int);
    isr,            \* the ISR as this replica knows it while it leads ({} otherwise)
    \* @type: Int -> (Int -> Int);
    remoteLeo,      \* remoteLeo[l][f]: leader l's view of follower f's LEO (-1: unknown)
    \* --- the controller and the cluster ---
    \* @type: Set(Int);
    alive,          \* brokers that are running
    \* @type: Set(Int);
    logDirOffline,  \* brokers whose log dir has failed: their Partition answers
                    \* KAFKA_STORAGE_ERROR until they halt and come back (Restart)
    \* @type: Int -> Int;
    incarnation,    \* how many times each broker has started (its connections' lifetime)
    \* @type: Set(Int);
    ctrlLive,       \* brokers the controller believes alive (their ZooKeeper sessions)
    \* @type: Int;
    ctrlLeader,     \* the leader the controller elected (it may have died since), or NoLeader
    \* @type: Int;
    ctrlEpoch,      \* the controller's leader epoch
    \* @type: Set(Int);
    ctrlIsr,        \* the ISR in the controller (ZooKeeper)
    \* @type: Set($message);
    msgs,           \* messages in flight
    \* --- clients and history (for the invariants) ---
    \* @type: Int;
    nextRecord,     \* the id of the next record a producer sends
    \* @type: Set({record: Int, replica: Int, offset: Int});
    pending,        \* acks=-1 produces waiting in the leader's purgatory
    \* @type: Set(Int);
    acked,          \* records acknowledged to a producer (acks=-1 or acks=1)
    \* @type: Set(<<Int, Int>>);
    committed,      \* <<offset, record>> ever below a leader's HW: what consumers read
    \* @type: Int;
    crashes,        \* process crashes so far
    \* @type: Int;
    uncleanShutdowns, \* unclean shutdowns so far
    \* @type: Set({replica: Int, record: Int, cause: Str});
    removed,        \* records removed from a log, by truncation or an unclean shutdown
    \* @type: {name: Str, args: Str -> Int};  (LeaderShrinkIsr's `followers` is a set)
    action          \* the action that produced this state, and its arguments

replicaVars == <<log, hw, epochCache, recoveryPoint, leaderEpoch, leader,
                 fetchState, isr, remoteLeo>>
clusterVars == <<alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr,
                 msgs>>
historyVars == <<nextRecord, pending, acked, committed, crashes, uncleanShutdowns>>
vars == <<replicaVars, hwCheckpoint, clusterVars, historyVars, removed, action>>

\* Replica r's HW checkpoint may still be read, by its Restart: r is down, or
\* will halt (its log dir failed), or a crash or a power loss may still come.
CheckpointMayBeRead(r) ==
    \/ r \notin alive \/ r \in logDirOffline
    \/ crashes < MaxCrashes \/ uncleanShutdowns < MaxUncleanShutdowns

\* The fingerprint leaves out `removed` and `action`: they record how a state was
\* reached, and no invariant but the witnesses reads them (witness configs omit VIEW).
\* It leaves out a HW checkpoint that no Restart can read any more, too.
View == <<replicaVars,
          [r \in DOMAIN hwCheckpoint |-> IF CheckpointMayBeRead(r) THEN hwCheckpoint[r] ELSE -1],
          clusterVars, historyVars>>

-----------------------------------------------------------------------------
(* Helpers *)

Min(S) == CHOOSE x \in S : \A y \in S : x <= y
Max(S) == CHOOSE x \in S : \A y \in S : x >= y
Min2(a, b) == IF a <= b THEN a ELSE b
Max2(a, b) == IF a >= b THEN a ELSE b

LEO(r) == Len(log[r])
Prefix(s, n) == SubSeq(s, 1, n)
RecordsOf(r) == {log[r][i].record : i \in DOMAIN log[r]} \ {Deleted.record}

\* Log.logStartOffset: the first offset whose record is still in the log (0 at
\* once when the first offset still has its record, as in every config that
\* deletes nothing).
LogStart(r) ==
    IF LEO(r) = 0 \/ log[r][1] # Deleted THEN 0
    ELSE LET kept == {i \in DOMAIN log[r] : log[r][i] # Deleted}
         IN  IF kept = {} THEN LEO(r) ELSE Min(kept) - 1

\* Sequence s with every entry below offset `start` deleted.
DeleteBelow(s, start) == [i \in DOMAIN s |-> IF i <= start THEN Deleted ELSE s[i]]

\* Two logs agree on their first n offsets wherever both still hold a record
\* (equal prefixes, checked first, are the common case).
Agree(s, t, n) ==
    \/ Prefix(s, n) = Prefix(t, n)
    \/ \A i \in 1..n : s[i] = t[i] \/ Deleted \in {s[i], t[i]}
Act(name, args) == action' = [name |-> name, args |-> args]

LatestEpoch(r) ==
    IF epochCache[r] = <<>> THEN Undefined ELSE epochCache[r][Len(epochCache[r])].epoch

\* LeaderEpochFileCache.assign (R2).
Assign(cache, e, start) ==
    IF cache # <<>> /\ cache[Len(cache)].epoch = e /\ start >= cache[Len(cache)].startOffset
    THEN cache
    ELSE Append(SelectSeq(cache, LAMBDA c: c.epoch < e /\ c.startOffset < start),
                [epoch |-> e, startOffset |-> start])

\* LeaderEpochFileCache.truncateFromEnd (R4).
TruncateFromEnd(cache, off) == SelectSeq(cache, LAMBDA c: c.startOffset < off)

\* LeaderEpochFileCache.truncateFromStart (R4): the epochs that start at or
\* below `off` go, but the last of them, which now starts at `off`.
TruncateFromStart(cache, off) ==
    LET below == {i \in DOMAIN cache : cache[i].startOffset <= off}
    IN  IF below = {} THEN cache
        ELSE <<[epoch |-> cache[Max(below)].epoch, startOffset |-> off]>>
                \o SubSeq(cache, Max(below) + 1, Len(cache))

\* Assign the epoch of every batch a follower appends at offsets from..
RECURSIVE AssignAll(_, _, _)
AssignAll(cache, entries, from) ==
    IF entries = <<>> THEN cache
    ELSE AssignAll(Assign(cache, Head(entries).epoch, from), Tail(entries), from + 1)

\* LeaderEpochFileCache.endOffsetFor (R3), as KIP-279 answers:
\* <<largest epoch <= requested, the offset where it ends>>.
EndOffsetFor(cache, requested, leo) ==
    LET n == Len(cache)
        higher == {i \in 1..n : cache[i].epoch > requested}
        atMost == {i \in 1..n : cache[i].epoch <= requested}
    IN  IF requested = Undefined \/ n = 0 THEN <<Undefined, Undefined>>
        ELSE IF requested = cache[n].epoch THEN <<requested, leo>>
        ELSE IF higher = {} THEN <<Undefined, Undefined>>
        ELSE IF atMost = {} THEN <<requested, cache[1].startOffset>>
        ELSE <<cache[Max(atMost)].epoch, cache[Min(higher)].startOffset>>

\* The KIP-101 answer (Kafka 1.x LeaderEpochFileCache.endOffsetFor): the start
\* of the first epoch above `requested`, no epoch; none for an epoch older than
\* every cached one.
EndOffsetForKip101(cache, requested, leo) ==
    LET n == Len(cache)
        higher == {i \in 1..n : cache[i].epoch > requested}
    IN  IF requested = Undefined \/ n = 0 THEN <<Undefined, Undefined>>
        ELSE IF requested = cache[n].epoch THEN <<Undefined, leo>>
        ELSE IF higher = {} \/ requested < cache[1].epoch THEN <<Undefined, Undefined>>
        ELSE <<Undefined, cache[Min(higher)].startOffset>>

\* ReplicaManager.getPartitionOrException (a replica that has not heard of the
\* partition since it started hosts none; a hosted Partition whose log dir
\* failed is offline: KAFKA_STORAGE_ERROR), Partition.checkCurrentLeaderEpoch
\* (a hosted Partition with NoEpoch is older than any epoch a request carries),
\* then the leader check (R1).
RequestError(l, epoch) ==
    IF leaderEpoch[l] = NotHosted THEN "NOT_LEADER_OR_FOLLOWER"
    ELSE IF l \in logDirOffline THEN "KAFKA_STORAGE_ERROR"
    ELSE IF Fencing = "kip320" /\ epoch < leaderEpoch[l] THEN "FENCED_LEADER_EPOCH"
    ELSE IF Fencing = "kip320" /\ epoch > leaderEpoch[l] THEN "UNKNOWN_LEADER_EPOCH"
    ELSE IF leader[l] # l THEN "NOT_LEADER_OR_FOLLOWER"
    ELSE "NONE"

\* The leader-epoch start offset of leader l: where its current epoch began (R5).
Leso(l) ==
    LET here == {i \in DOMAIN epochCache[l] : epochCache[l][i].epoch = leaderEpoch[l]}
    IN  IF here = {} THEN LEO(l) ELSE epochCache[l][Min(here)].startOffset

\* The HW that leader l's ISR supports (R13), from its LEO and its followers' LEOs.
\* The seeded bug "hw-from-non-isr" counts the followers the leader has heard
\* from instead, in the ISR or not, and so skips ISR members it has not.
IsrHw(l, lg, rl, is) ==
    LET counted == IF "hw-from-non-isr" \in Bugs
                   THEN {f \in Replicas \ {l} : rl[l][f] >= 0}
                   ELSE is \ {l}
    IN  Min({Len(lg[l])} \cup {rl[l][f] : f \in counted})

\* Partition.maybeIncrementLeaderHW (R13): the HW only moves forward.
NewHw(l, lg, rl, is) ==
    LET c == IsrHw(l, lg, rl, is) IN IF c > hw[l] THEN c ELSE hw[l]

\* Followers outside the ISR that leader l may also wait for (R13): Kafka 2.6.3
\* counts a follower that caught up within replica.lag.time.max.ms, in the ISR
\* or not, so that the HW does not outrun a follower that is catching up.  Time
\* is abstracted: any follower l has heard from in its term may be one.
CatchingUp(l, rl, is) == {f \in Replicas \ (is \cup {l}) : rl[l][f] >= 0}

\* The HWs leader l may move to: its ISR's, held back by followers catching up.
NewHws(l, lg, rl, is) == {NewHw(l, lg, rl, is \cup c) : c \in SUBSET CatchingUp(l, rl, is)}

\* What consumers may read below leader l's HW once it is newHw.
Exposed(l, lg, newHw) ==
    {<<o, lg[l][o + 1].record>> : o \in {o \in 0..(newHw - 1) : lg[l][o + 1] # Deleted}}

\* DelayedProduce.tryComplete for every produce waiting on leader l (R14):
\* done once the HW passes the record; acked only if the ISR is large enough.
DoneProduces(l, lg, newHw) ==
    {p \in pending : p.replica = l /\ p.offset < newHw
                     /\ Len(lg[l]) > p.offset /\ lg[l][p.offset + 1].record = p.record}
AckedProduces(l, lg, newHw, is) ==
    IF Cardinality(is) >= MinIsr THEN {p.record : p \in DoneProduces(l, lg, newHw)} ELSE {}

\* Move leader l's HW to newHw: expose the records and complete waiting produces.
AdvanceHw(l, lg, newHw, is) ==
    /\ hw' = [hw EXCEPT ![l] = newHw]
    /\ committed' = committed \cup Exposed(l, lg, newHw)
    /\ pending' = pending \ DoneProduces(l, lg, newHw)
    /\ acked' = acked \cup AckedProduces(l, lg, newHw, is)

\* Log.truncateTo: drop the offsets from `to` on.  When `to` is at or past the
\* LEO no record goes, but Kafka 2.6.3 still truncates the epoch cache from the
\* LEO (KAFKA-10706's fix, R4): an epoch this replica started as leader without
\* writing a record in it goes.  Kafka 2.6.0 left the cache as it was (the
\* seeded bug "kafka-10706"), so a follower could keep that epoch and never
\* finish truncating after back-to-back elections.
Truncate(r, to, cause) ==
    IF to >= LEO(r)
    THEN /\ epochCache' = IF "kafka-10706" \in Bugs THEN epochCache
                          ELSE [epochCache EXCEPT ![r] = TruncateFromEnd(@, LEO(r))]
         /\ UNCHANGED <<log, hw, recoveryPoint, removed>>
    ELSE /\ log' = [log EXCEPT ![r] = Prefix(@, to)]
         /\ epochCache' = [epochCache EXCEPT ![r] = TruncateFromEnd(@, to)]
         /\ hw' = [hw EXCEPT ![r] = Min2(@, to)]
         /\ recoveryPoint' = [recoveryPoint EXCEPT ![r] = Min2(@, to)]
         /\ removed' = removed \cup {[replica |-> r, record |-> log[r][i].record,
                                      cause |-> cause] : i \in {i \in (to + 1)..LEO(r) :
                                                                log[r][i] # Deleted}}

\* Log.truncateFullyAndStartAt: follower f drops its whole log and starts it
\* empty at `start` (above its LEO), HW and recovery point there too; the
\* epoch cache is cleared.  The records it dropped were deleted on the leader.
TruncateFullyAndStartAt(f, start) ==
    /\ log' = [log EXCEPT ![f] = [i \in 1..start |-> Deleted]]
    /\ epochCache' = [epochCache EXCEPT ![f] = <<>>]
    /\ hw' = [hw EXCEPT ![f] = start]
    /\ recoveryPoint' = [recoveryPoint EXCEPT ![f] = start]
    /\ UNCHANGED removed

\* The answers to a fetcher's requests (requests carry `inc`, answers do not).
Responses == {"FetchResponse", "OffsetsForLeaderEpochResponse", "ListOffsetsResponse"}

\* What follower f's fetcher awaits from its leader: its requests of this life on
\* the way there, and the answers on the way back.
Awaited(f) ==
    {m \in msgs : \/ /\ "inc" \in DOMAIN m /\ m.src = f /\ m.dst = leader[f]
                     /\ m.inc = incarnation[f]
                  \/ m.type \in Responses /\ m.dst = f /\ m.src = leader[f]}

Outstanding(f) == Awaited(f) # {}

FollowsLeader(f) == f \in alive /\ leader[f] \notin {NoLeader, f}

LeaderAndIsr(r, epoch, l, is) ==
    [type |-> "LeaderAndIsr", src |-> Controller, dst |-> r, epoch |-> epoch, leader |-> l, isr |-> is]

\* LeaderAndIsr for the partition's new state to each broker in `to` that is
\* `running` (the controller also sends to brokers it wrongly believes alive;
\* the network drops those, so they never enter msgs).
Propagate(to, running, epoch, l, is) ==
    {LeaderAndIsr(r, epoch, l, is) : r \in to \cap running}

\* The network carries a message only to a running broker: one sent to a
\* stopped broker is lost (its connection is refused), so it never enters msgs.
Deliverable(m) == IF m.dst \in alive THEN {m} ELSE {}

\* Receive m and send `out`: m leaves the network, unless the network delivers
\* more than once (DuplicatingNetwork) and another copy of m is still on its way.
Receive(m, out) ==
    \/ msgs' = (msgs \ {m}) \cup out
    \/ DuplicatingNetwork /\ msgs' = msgs \cup out

\* Answer request m.  A response to a requester that has stopped, or restarted
\* since it sent m, is lost with the connection it was to travel on.
Reply(m, response) ==
    Receive(m, IF "inc" \notin DOMAIN m \/ (m.src \in alive /\ m.inc = incarnation[m.src])
               THEN Deliverable(response) ELSE {})
Consume(m) == Receive(m, {})

\* NetworkClient's request timeout (replica.socket.timeout.ms), seen by
\* AbstractFetcherThread as a failed request: the fetcher gives up on what it
\* awaits and closes the connection.  A request may still reach the leader, but
\* its answer is dropped (incarnation 0 is no life of f); answers on their way
\* are lost.  Only an unreliable network (LossyNetwork) makes a fetcher time out.
GiveUp(f) ==
    (msgs \ Awaited(f)) \cup {[m EXCEPT !.inc = 0] : m \in {a \in Awaited(f) : "inc" \in DOMAIN a}}

\* Follower f's fetcher sends `request` to its leader: it awaits nothing more,
\* or it has given up waiting (an IF, not a disjunction: when both hold, TLC
\* would compute the same successor twice).
FetcherSend(f, request) ==
    /\ IF LossyNetwork THEN TRUE ELSE ~Outstanding(f)
    /\ msgs' = GiveUp(f) \cup Deliverable(request)

\* Follower f's fetcher handles an answer and sends `request` at once, inside
\* the same fetch handling (R9).  Like FetcherSend, it now awaits that request
\* only: what else it awaited (a copy of an earlier request or answer, left
\* by a duplicating network) is given up, the answer it handles included.
FetcherSendOnAnswer(f, request) == msgs' = GiveUp(f) \cup Deliverable(request)

\* The LIST_OFFSETS request of follower f's fetcher to leader l, for the
\* "LATEST" or the "EARLIEST" offset.
ListOffsetsRequest(f, l, timestamp) ==
    [type |-> "ListOffsetsRequest", src |-> f, dst |-> l, inc |-> incarnation[f],
     epoch |-> leaderEpoch[f], timestamp |-> timestamp]

-----------------------------------------------------------------------------
(* The initial state: the controller has made replica Min(Replicas) leader in *)
(* epoch 0 with every replica in the ISR, and every replica has handled that  *)
(* LeaderAndIsr (the leader assigned epoch 0 at offset 0, R5).                *)

FirstLeader == Min(Replicas)

Init ==
    /\ log = [r \in Replicas |-> <<>>]
    /\ hw = [r \in Replicas |-> 0]
    /\ hwCheckpoint = [r \in Replicas |-> 0]
    /\ epochCache = [r \in Replicas |->
                        IF r = FirstLeader THEN <<[epoch |-> 0, startOffset |-> 0]>> ELSE <<>>]
    /\ recoveryPoint = [r \in Replicas |-> 0]
    /\ leaderEpoch = [r \in Replicas |-> 0]
    /\ leader = [r \in Replicas |-> FirstLeader]
    /\ fetchState = [r \in Replicas |-> IF r = FirstLeader THEN "Idle" ELSE "Truncating"]
    /\ isr = [r \in Replicas |-> IF r = FirstLeader THEN Replicas ELSE {}]
    /\ remoteLeo = [r \in Replicas |-> [f \in Replicas |-> -1]]
    /\ alive = Replicas
    /\ logDirOffline = {}
    /\ incarnation = [r \in Replicas |-> 1]
    /\ ctrlLive = Replicas
    /\ ctrlLeader = FirstLeader
    /\ ctrlEpoch = 0
    /\ ctrlIsr = Replicas
    /\ msgs = {}
    /\ nextRecord = 1
    /\ pending = {}
    /\ acked = {}
    /\ committed = {}
    /\ crashes = 0
    /\ uncleanShutdowns = 0
    /\ removed = {}
    /\ action = [name |-> "Init", args |-> <<>>]

-----------------------------------------------------------------------------
(* Clients *)

\* The acks a producer may ask for, per request as Kafka lets it: -1 only, or under the
\* acks=1 variant -1 or 1 (some producers settle for the leader's word); 0 with
\* FireAndForget.
ProducerAcks == (IF Acks = "-1" THEN {-1} ELSE {-1, 1}) \cup (IF FireAndForget THEN {0} ELSE {})

\* ReplicaManager.appendRecords -> Partition.appendRecordsToLeader (R14, R13).
\* A producer sends record `nextRecord` to leader l with `acks` (per request).
\* With acks=-1 and an ISR below min.insync.replicas it is refused
\* (NOT_ENOUGH_REPLICAS) and nothing is appended, as on a failed log dir
\* (KAFKA_STORAGE_ERROR).  Otherwise it is appended in
\* the leader's epoch; acks=1 is answered at once, acks=-1 waits in the
\* purgatory until the HW passes it, and acks=0 is never answered (never acked).
\* The append may move the HW past produces already waiting (when a follower
\* catching up no longer holds it back), which it completes.
Produce(l, acks) ==
    /\ l \in alive /\ leader[l] = l
    /\ acks \in ProducerAcks
    /\ nextRecord <= MaxRecords
    /\ nextRecord' = nextRecord + 1
    /\ Act("Produce", [replica |-> l, record |-> nextRecord, acks |-> acks])
    /\ UNCHANGED hwCheckpoint
    /\ IF (acks = -1 /\ Cardinality(isr[l]) < MinIsr) \/ l \in logDirOffline
       THEN UNCHANGED <<replicaVars, clusterVars, pending, acked, committed,
                        crashes, uncleanShutdowns, removed>>
       ELSE LET off == LEO(l)
                lg == [log EXCEPT ![l] = Append(@, [epoch |-> leaderEpoch[l],
                                                    record |-> nextRecord])]
                p == [record |-> nextRecord, replica |-> l, offset |-> off]
                waits == acks = -1 /\ "early-ack" \notin Bugs
                own == IF acks = 0 \/ (waits /\ Cardinality(isr[l]) < MinIsr)
                       THEN {} ELSE {nextRecord}
            IN  \E newHw \in NewHws(l, lg, remoteLeo, isr[l]) :
                /\ log' = lg
                /\ epochCache' = [epochCache EXCEPT ![l] = Assign(@, leaderEpoch[l], off)]
                /\ hw' = [hw EXCEPT ![l] = newHw]
                /\ committed' = committed \cup Exposed(l, lg, newHw)
                \* the new HW completes the produces already waiting, as AdvanceHw
                \* (tryCompleteDelayedRequests); then this one waits or is answered
                /\ IF waits /\ newHw <= off
                   THEN pending' = (pending \ DoneProduces(l, lg, newHw)) \cup {p}
                   ELSE pending' = pending \ DoneProduces(l, lg, newHw)
                /\ acked' = acked \cup AckedProduces(l, lg, newHw, isr[l])
                               \cup (IF waits /\ newHw <= off THEN {} ELSE own)
                /\ UNCHANGED <<recoveryPoint, leaderEpoch, leader, fetchState, isr,
                               remoteLeo, clusterVars, crashes, uncleanShutdowns, removed>>

\* DelayedProduce.onExpiration (R14): a waiting acks=-1 produce times out with
\* REQUEST_TIMED_OUT; its record stays in the log, unacknowledged.
ExpireDelayedProduce(p) ==
    /\ p \in pending
    /\ pending' = pending \ {p}
    /\ Act("ExpireDelayedProduce", [replica |-> p.replica, record |-> p.record])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, clusterVars, nextRecord, acked, committed, crashes,
                   uncleanShutdowns, removed>>

\* ReplicaManager.deleteRecords -> Partition.deleteRecordsOnLeader (R4): a client
\* deletes the records below `offset`, at most the HW, on leader l; its log
\* start offset moves up (Log.maybeIncrementLogStartOffset, a no-op at or below
\* it), and its epoch cache forgets the epochs before it.  Followers learn the
\* new log start offset from their fetches.
DeleteRecords(l, offset) ==
    /\ RecordDeletion
    /\ l \in alive /\ l \notin logDirOffline /\ leader[l] = l
    /\ offset \in 0..hw[l]
    /\ Act("DeleteRecords", [replica |-> l, offset |-> offset])
    /\ UNCHANGED hwCheckpoint
    /\ IF offset > LogStart(l)
       THEN /\ log' = [log EXCEPT ![l] = DeleteBelow(@, offset)]
            /\ epochCache' = [epochCache EXCEPT ![l] = TruncateFromStart(@, offset)]
       ELSE UNCHANGED <<log, epochCache>>
    /\ UNCHANGED <<hw, recoveryPoint, leaderEpoch, leader, fetchState, isr, remoteLeo,
                   clusterVars, historyVars, removed>>

-----------------------------------------------------------------------------
(* Replication: the fetch path *)

\* AbstractFetcherThread.maybeFetch / ReplicaFetcherThread.buildFetch (R8):
\* follower f asks its leader for records from its LEO, in its leader epoch
\* (having given up on any request still unanswered: FetcherSend).
FollowerSendFetch(f) ==
    /\ FollowsLeader(f) /\ f \notin logDirOffline
    /\ fetchState[f] = "Fetching"
    /\ FetcherSend(f, [type |-> "FetchRequest", src |-> f, dst |-> leader[f],
                       inc |-> incarnation[f], epoch |-> leaderEpoch[f], offset |-> LEO(f)])
    /\ Act("FollowerSendFetch", [replica |-> f, leader |-> leader[f]])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch,
                   ctrlIsr, historyVars, removed>>

\* ReplicaManager.fetchMessages for a follower (R15, R1, R10, R11, R13): record
\* the follower's LEO, maybe add it to the ISR, maybe advance the HW, and send
\* back the records from its fetch offset with the HW as it was BEFORE this fetch,
\* and the log start offset.  An offset outside [log start, LEO] is OFFSET_OUT_OF_RANGE.
LeaderHandleFetch(m) ==
    /\ m \in msgs /\ m.type = "FetchRequest" /\ m.dst \in alive
    /\ LET l == m.dst
           f == m.src
           err == RequestError(l, m.epoch)
           response(e, entries) ==
               [type |-> "FetchResponse", src |-> l, dst |-> f, epoch |-> m.epoch,
                offset |-> m.offset, error |-> e, entries |-> entries,
                hw |-> IF e = "NONE" THEN hw[l] ELSE Undefined,   \* no HW with an error
                logStart |-> IF e = "NONE" THEN LogStart(l) ELSE Undefined]
       IN
       /\ Act("LeaderHandleFetch", [replica |-> l, follower |-> f, offset |-> m.offset])
       /\ UNCHANGED hwCheckpoint
       /\ IF err = "NONE" /\ LogStart(l) <= m.offset /\ m.offset <= LEO(l)
          THEN LET rl == [remoteLeo EXCEPT ![l][f] = m.offset]
                   expand == /\ f \notin isr[l]
                             /\ m.offset >= hw[l]
                             /\ m.offset >= Leso(l) \/ "no-leso-guard" \in Bugs
                             /\ leaderEpoch[l] = ctrlEpoch   \* the ISR write succeeds
                   newIsr == IF expand THEN isr[l] \cup {f} ELSE isr[l]
               IN  \E newHw \in NewHws(l, log, rl, newIsr) :
                   /\ remoteLeo' = rl
                   /\ isr' = [isr EXCEPT ![l] = newIsr]
                   /\ ctrlIsr' = IF expand THEN newIsr ELSE ctrlIsr
                   /\ AdvanceHw(l, log, newHw, newIsr)
                   /\ Reply(m, response("NONE", SubSeq(log[l], m.offset + 1,
                                                       Min2(LEO(l), m.offset + MaxFetchRecords))))
                   /\ UNCHANGED <<log, epochCache, recoveryPoint, leaderEpoch, leader,
                                  fetchState, alive, logDirOffline, incarnation, ctrlLive,
                                  ctrlLeader, ctrlEpoch, nextRecord, crashes, uncleanShutdowns,
                                  removed>>
          ELSE /\ Reply(m, response(IF err = "NONE" THEN "OFFSET_OUT_OF_RANGE" ELSE err, <<>>))
               /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader,
                              ctrlEpoch, ctrlIsr, historyVars, removed>>

\* AbstractFetcherThread.processFetchRequest (R8): follower f appends what its
\* leader sent, sets HW = min(leader HW, own LEO) (never below its log start),
\* and raises its log start offset to the leader's; on OFFSET_OUT_OF_RANGE it
\* asks the leader for its LEO (R9).  A response that no longer matches the
\* fetcher's state is ignored.  On a failed log dir the append fails, and the
\* Partition is marked failed.
FollowerHandleFetchResponse(m) ==
    /\ m \in msgs /\ m.type = "FetchResponse" /\ m.dst \in alive
    /\ LET f == m.dst
           current == /\ fetchState[f] = "Fetching" /\ leader[f] = m.src
                      /\ leaderEpoch[f] = m.epoch /\ m.offset = LEO(f)
           appended == log[f] \o m.entries
           raise == current /\ m.error = "NONE" /\ m.logStart > LogStart(f)
           newLog == IF raise THEN DeleteBelow(appended, m.logStart) ELSE appended
           cache == AssignAll(epochCache[f], m.entries, m.offset)
       IN
       /\ Act("FollowerHandleFetchResponse", [replica |-> f, leader |-> m.src])
       /\ UNCHANGED hwCheckpoint
       /\ IF current /\ m.error = "OFFSET_OUT_OF_RANGE"
          THEN FetcherSendOnAnswer(f, ListOffsetsRequest(f, m.src, "LATEST"))
          ELSE Consume(m)
       /\ CASE current /\ m.error = "NONE" /\ f \in logDirOffline ->   \* the append fails
                 /\ fetchState' = [fetchState EXCEPT ![f] = "Failed"]
                 /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, leaderEpoch, leader, isr,
                                remoteLeo, removed>>
            [] current /\ m.error = "NONE" ->
                 /\ log' = [log EXCEPT ![f] = newLog]
                 /\ epochCache' = [epochCache EXCEPT ![f] =
                                      IF raise THEN TruncateFromStart(cache, m.logStart)
                                      ELSE cache]
                 /\ hw' = [hw EXCEPT ![f] = IF "hw-not-clamped" \in Bugs THEN m.hw
                                            ELSE Max2(LogStart(f), Min2(m.hw, Len(newLog)))]
                 /\ UNCHANGED <<recoveryPoint, leaderEpoch, leader, fetchState, isr,
                                remoteLeo, removed>>
            [] current /\ m.error = "FENCED_LEADER_EPOCH" ->   \* R7: mark failed
                 /\ fetchState' = [fetchState EXCEPT ![f] = "Failed"]
                 /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, leaderEpoch, leader,
                                isr, remoteLeo, removed>>
            [] OTHER ->   \* stale, or an error to back off from and retry
                 UNCHANGED <<replicaVars, removed>>
       /\ UNCHANGED <<alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr,
                      historyVars>>

\* ReplicaManager.fetchOffsetForTimestamp (ListOffsets) for a follower (R9, R1):
\* the leader answers LATEST with its LEO and EARLIEST with its log start offset.
LeaderHandleListOffsets(m) ==
    /\ m \in msgs /\ m.type = "ListOffsetsRequest" /\ m.dst \in alive
    /\ LET l == m.dst
           err == RequestError(l, m.epoch)
           offset == IF m.timestamp = "LATEST" THEN LEO(l) ELSE LogStart(l)
       IN  /\ Reply(m, [type |-> "ListOffsetsResponse", src |-> l, dst |-> m.src,
                        epoch |-> m.epoch, error |-> err, timestamp |-> m.timestamp,
                        offset |-> IF err = "NONE" THEN offset ELSE Undefined])
           /\ Act("LeaderHandleListOffsets", [replica |-> l, follower |-> m.src])
           /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch,
                   ctrlIsr, historyVars, removed>>

\* AbstractFetcherThread.fetchOffsetAndTruncate (R9), the two LIST_OFFSETS
\* calls Kafka makes inside handleOutOfRangeError: a follower whose log is
\* longer than its leader's LEO truncates to it; otherwise it truncates nothing
\* (not even its epoch cache, which a truncation to its own LEO would trim) and
\* asks for the leader's log start offset, and fetches from the larger of that
\* and its own LEO: when the leader's log starts above its LEO, it drops its
\* whole log and starts it there (truncateFullyAndStartAt).
FollowerHandleListOffsetsResponse(m) ==
    /\ m \in msgs /\ m.type = "ListOffsetsResponse" /\ m.dst \in alive
    /\ LET f == m.dst
           current == /\ fetchState[f] = "Fetching" /\ leader[f] = m.src
                      /\ leaderEpoch[f] = m.epoch
           latest == current /\ m.error = "NONE" /\ m.timestamp = "LATEST"
           earliest == current /\ m.error = "NONE" /\ m.timestamp = "EARLIEST"
       IN
       /\ Act("FollowerHandleListOffsetsResponse", [replica |-> f, leader |-> m.src])
       /\ UNCHANGED hwCheckpoint
       /\ IF latest /\ m.offset >= LEO(f)
          THEN FetcherSendOnAnswer(f, ListOffsetsRequest(f, m.src, "EARLIEST"))
          ELSE Consume(m)
       /\ CASE latest /\ m.offset < LEO(f) /\ f \notin logDirOffline ->
                 /\ Truncate(f, m.offset, "truncation")
                 /\ UNCHANGED fetchState
            [] earliest /\ m.offset > LEO(f) /\ f \notin logDirOffline ->
                 /\ TruncateFullyAndStartAt(f, m.offset)
                 /\ UNCHANGED fetchState
            [] current /\ m.error = "FENCED_LEADER_EPOCH" ->
                 /\ fetchState' = [fetchState EXCEPT ![f] = "Failed"]
                 /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, removed>>
            [] OTHER ->   \* LATEST at or above the LEO (EARLIEST asked above), EARLIEST at
                          \* or below the LEO (nothing to do), stale, an error, or a
                          \* truncation that fails on a failed log dir (back off, retry)
                 UNCHANGED <<log, hw, epochCache, recoveryPoint, fetchState, removed>>
       /\ UNCHANGED <<leaderEpoch, leader, isr, remoteLeo, alive, logDirOffline, incarnation,
                      ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr, historyVars>>

-----------------------------------------------------------------------------
(* Replication: truncation when a replica becomes a follower *)

\* AbstractFetcherThread.doWork with truncateToHighWatermark (R7, R6a): the
\* pre-KIP-101 protocol, and any follower whose epoch cache is empty, truncate
\* to the HW; the same iteration of the fetcher thread (awaiting no earlier
\* request, or having given up on it) then sends its first fetch.
FollowerTruncateToHighWatermark(f) ==
    /\ FollowsLeader(f)
    /\ fetchState[f] = "Truncating"
    /\ Truncation = "hw" \/ epochCache[f] = <<>>
    /\ IF f \in logDirOffline   \* the truncation fails: doTruncate marks the Partition failed
       THEN /\ fetchState' = [fetchState EXCEPT ![f] = "Failed"]
            /\ UNCHANGED <<log, epochCache, hw, recoveryPoint, removed, msgs>>
       ELSE /\ Truncate(f, hw[f], "truncation")
            /\ fetchState' = [fetchState EXCEPT ![f] = "Fetching"]
            /\ FetcherSend(f, [type |-> "FetchRequest", src |-> f, dst |-> leader[f],
                               inc |-> incarnation[f], epoch |-> leaderEpoch[f],
                               offset |-> Min2(hw[f], LEO(f))])
    /\ Act("FollowerTruncateToHighWatermark", [replica |-> f, leader |-> leader[f]])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<leaderEpoch, leader, isr, remoteLeo, alive, logDirOffline, incarnation, ctrlLive,
                   ctrlLeader, ctrlEpoch, ctrlIsr, historyVars>>

\* AbstractFetcherThread.maybeTruncate -> fetchEpochEndOffsets (R7): follower f
\* asks its leader where its latest epoch ends, sending its current epoch too.
FollowerSendOffsetsForLeaderEpoch(f) ==
    /\ FollowsLeader(f)
    /\ fetchState[f] = "Truncating"
    /\ Truncation # "hw" /\ epochCache[f] # <<>>
    /\ FetcherSend(f, [type |-> "OffsetsForLeaderEpochRequest", src |-> f, dst |-> leader[f],
                       inc |-> incarnation[f], epoch |-> leaderEpoch[f],
                       requested |-> LatestEpoch(f)])
    /\ Act("FollowerSendOffsetsForLeaderEpoch", [replica |-> f, leader |-> leader[f]])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch,
                   ctrlIsr, historyVars, removed>>

\* ReplicaManager.lastOffsetForLeaderEpoch (R1, R3): the leader answers with
\* the end of the requested epoch in its own log.
LeaderHandleOffsetsForLeaderEpoch(m) ==
    /\ m \in msgs /\ m.type = "OffsetsForLeaderEpochRequest" /\ m.dst \in alive
    /\ LET l == m.dst
           err == RequestError(l, m.epoch)
           answer == IF Truncation = "kip101"
                     THEN EndOffsetForKip101(epochCache[l], m.requested, LEO(l))
                     ELSE EndOffsetFor(epochCache[l], m.requested, LEO(l))
       IN  /\ Reply(m, [type |-> "OffsetsForLeaderEpochResponse", src |-> l, dst |-> m.src,
                        epoch |-> m.epoch, requested |-> m.requested, error |-> err,
                        leaderEpoch |-> IF err = "NONE" THEN answer[1] ELSE Undefined,
                        endOffset |-> IF err = "NONE" THEN answer[2] ELSE Undefined])
           /\ Act("LeaderHandleOffsetsForLeaderEpoch",
                  [replica |-> l, follower |-> m.src, requested |-> m.requested])
           /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch,
                   ctrlIsr, historyVars, removed>>

\* The follower's truncation offset and whether truncation is complete (R6).
TruncationPoint(f, eL, oL) ==
    LET mine == EndOffsetFor(epochCache[f], eL, LEO(f)) IN
    IF Truncation = "kip101"
    THEN IF oL = Undefined THEN <<hw[f], TRUE>> ELSE <<Min2(oL, LEO(f)), TRUE>>
    ELSE CASE oL = Undefined -> <<hw[f], TRUE>>                          \* (a)
           [] eL = Undefined -> <<Min2(oL, LEO(f)), TRUE>>               \* (b)
           [] mine[2] = Undefined -> <<Min2(oL, LEO(f)), TRUE>>          \* (c)
           [] mine[1] # eL -> <<Min2(mine[2], LEO(f)), FALSE>>           \* (d)
           [] OTHER -> <<Min2(Min2(oL, mine[2]), LEO(f)), TRUE>>         \* (e)

\* AbstractFetcherThread.truncateToEpochEndOffsets (R6, R7): follower f
\* truncates where its log leaves the leader's, then fetches (or asks again).
\* On a failed log dir the truncation fails (doTruncate marks the Partition
\* failed).
FollowerHandleOffsetsForLeaderEpochResponse(m) ==
    /\ m \in msgs /\ m.type = "OffsetsForLeaderEpochResponse" /\ m.dst \in alive
    /\ LET f == m.dst
           current == /\ fetchState[f] = "Truncating" /\ leader[f] = m.src
                      /\ leaderEpoch[f] = m.epoch
           point == TruncationPoint(f, m.leaderEpoch, m.endOffset)
       IN
       /\ Act("FollowerHandleOffsetsForLeaderEpochResponse", [replica |-> f, leader |-> m.src])
       /\ UNCHANGED hwCheckpoint
       /\ Consume(m)
       /\ CASE current /\ m.error = "NONE" /\ f \in logDirOffline ->   \* the truncation fails
                 /\ fetchState' = [fetchState EXCEPT ![f] = "Failed"]
                 /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, removed>>
            [] current /\ m.error = "NONE" ->
                 /\ Truncate(f, point[1], "truncation")
                 /\ fetchState' = [fetchState EXCEPT ![f] = IF point[2] THEN "Fetching"
                                                           ELSE "Truncating"]
            [] current /\ m.error = "FENCED_LEADER_EPOCH" ->
                 /\ fetchState' = [fetchState EXCEPT ![f] = "Failed"]
                 /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, removed>>
            [] OTHER ->
                 UNCHANGED <<log, hw, epochCache, recoveryPoint, fetchState, removed>>
       /\ UNCHANGED <<leaderEpoch, leader, isr, remoteLeo, alive, logDirOffline, incarnation,
                      ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr, historyVars>>

-----------------------------------------------------------------------------
(* Leadership: LeaderAndIsr *)

\* ReplicaManager.becomeLeaderOrFollower -> Partition.makeLeader / makeFollower
\* (R5, R10, R13).  A request whose epoch is not newer than the replica's is
\* ignored.  A leader assigns its epoch at its LEO; a new one forgets its
\* followers' LEOs.  A follower cancels its waiting produces and starts
\* truncating (unless the seeded bug skips that when the leader is unchanged).
\* A request whose leader is not a live broker (NoLeader: the partition is
\* offline) changes nothing but that the broker now hosts the Partition, with
\* NoEpoch if it had none: becomeLeaderOrFollower creates it before
\* makeFollowers aborts the transition.  A broker whose log dir failed answers
\* KAFKA_STORAGE_ERROR and changes nothing (the controller, which would then
\* mark the replica offline, is not modelled: the broker halts first).
BecomeLeaderOrFollower(m) ==
    /\ m \in msgs /\ m.type = "LeaderAndIsr" /\ m.dst \in alive
    /\ LET r == m.dst
           newLeader == m.leader = r
           wasLeader == leader[r] = r
           rl == IF newLeader /\ wasLeader THEN remoteLeo
                 ELSE [remoteLeo EXCEPT ![r] = [f \in Replicas |-> -1]]
           cache == IF newLeader THEN Assign(epochCache[r], m.epoch, LEO(r)) ELSE epochCache[r]
           skip == "skip-same-leader-truncation" \in Bugs /\ leader[r] = m.leader
           newHw == NewHw(r, log, rl, m.isr)
       IN
       /\ Act("BecomeLeaderOrFollower", [replica |-> r, epoch |-> m.epoch, leader |-> m.leader])
       /\ UNCHANGED hwCheckpoint
       /\ Consume(m)
       /\ IF r \in logDirOffline   \* answered KAFKA_STORAGE_ERROR: nothing changes
          THEN UNCHANGED <<replicaVars, historyVars>>
          ELSE IF m.epoch <= leaderEpoch[r] \/ m.leader = NoLeader
          THEN /\ leaderEpoch' = [leaderEpoch EXCEPT ![r] = IF @ = NotHosted THEN NoEpoch ELSE @]
               /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, leader, fetchState, isr,
                              remoteLeo, historyVars>>
          ELSE /\ leaderEpoch' = [leaderEpoch EXCEPT ![r] = m.epoch]
               /\ leader' = [leader EXCEPT ![r] = m.leader]
               /\ isr' = [isr EXCEPT ![r] = IF newLeader THEN m.isr ELSE {}]
               /\ remoteLeo' = rl
               /\ epochCache' = [epochCache EXCEPT ![r] = cache]
               /\ fetchState' = [fetchState EXCEPT ![r] =
                                    IF newLeader THEN "Idle"
                                    ELSE IF skip THEN @ ELSE "Truncating"]
               /\ IF newLeader
                  THEN AdvanceHw(r, log, newHw, m.isr)
                  ELSE /\ pending' = {p \in pending : p.replica # r}
                       /\ UNCHANGED <<hw, committed, acked>>
               /\ UNCHANGED <<log, recoveryPoint, nextRecord, crashes, uncleanShutdowns>>
       /\ UNCHANGED <<alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr,
                      removed>>

-----------------------------------------------------------------------------
(* The ISR *)

\* Partition.maybeShrinkIsr (R12): leader l drops the followers `out`, each of
\* which has not caught up to its LEO (time is abstracted: "too long" may be
\* any time, so any such set may go at once).  The ISR write succeeds only while
\* l leads the controller's current epoch and its session is live.  The HW is
\* then recomputed and may advance.
LeaderShrinkIsr(l, out) ==
    /\ l \in alive /\ l \notin logDirOffline /\ leader[l] = l
    /\ out # {} /\ out \subseteq isr[l] \ {l}
    /\ \A f \in out : remoteLeo[l][f] # LEO(l)
    /\ ctrlLeader = l /\ ctrlEpoch = leaderEpoch[l] /\ l \in ctrlLive
    /\ LET newIsr == isr[l] \ out
       IN  \E newHw \in NewHws(l, log, remoteLeo, newIsr) :
           /\ isr' = [isr EXCEPT ![l] = newIsr]
           /\ ctrlIsr' = newIsr
           /\ AdvanceHw(l, log, newHw, newIsr)
    /\ Act("LeaderShrinkIsr", [replica |-> l, followers |-> out])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<log, epochCache, recoveryPoint, leaderEpoch, leader, fetchState, remoteLeo,
                   alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch, msgs,
                   nextRecord, crashes, uncleanShutdowns, removed>>

-----------------------------------------------------------------------------
(* The controller *)

\* The partition after PartitionStateMachine's offline election among `live`:
\* the first live ISR member, keeping the live ISR; when unclean election is
\* enabled and none is left, the first live replica, alone in the ISR.
OfflineElection(is, live) ==
    LET clean == is \cap live
        unclean == IF Election = "unclean" THEN live \cap Replicas ELSE {}
    IN  IF clean # {} THEN [leader |-> Min(clean), isr |-> clean, elected |-> TRUE]
        ELSE IF unclean # {} THEN [leader |-> Min(unclean), isr |-> {Min(unclean)},
                                   elected |-> TRUE]
        ELSE [leader |-> NoLeader, isr |-> is, elected |-> FALSE]

\* The partition after KafkaController.onBrokerFailure(r): if r led it, elect
\* a new leader (or leave it offline, NoLeader); if r was in its ISR, drop r
\* (the last member stays).  `bump` says whether the leader epoch moves.
OnBrokerFailure(r) ==
    LET e == OfflineElection(ctrlIsr, ctrlLive \ {r}) IN
    CASE ctrlLeader = r /\ e.elected -> [leader |-> e.leader, isr |-> e.isr, bump |-> TRUE]
      [] r \in ctrlIsr -> [leader |-> IF ctrlLeader = r THEN NoLeader ELSE ctrlLeader,
                           isr |-> IF ctrlIsr = {r} THEN ctrlIsr ELSE ctrlIsr \ {r},
                           bump |-> TRUE]
      [] ctrlLeader = r -> [leader |-> NoLeader, isr |-> ctrlIsr, bump |-> TRUE]
      [] OTHER -> [leader |-> ctrlLeader, isr |-> ctrlIsr, bump |-> FALSE]

\* KafkaController.onBrokerFailure: the ZooKeeper session of crashed broker r
\* expires; the controller re-elects or shrinks the ISR, bumps the leader epoch
\* and tells the live replicas.  Where the environment is unreliable
\* (LossyNetwork) the session of a running broker may expire too: it was cut off
\* from ZooKeeper, or paused beyond zookeeper.session.timeout.ms; it runs on, and
\* registers again later (Reregister).  A controller that is failing over (the
\* controller ran on r, or moved) takes r's replicas offline first
\* (ReplicaStateMachine.startup: leader NoLeader, r out of the ISR, one epoch)
\* and then elects (PartitionStateMachine.startup: another epoch): `twice`.
\*
\* Brokers whose sessions expire together reach the controller as one
\* onBrokerFailure(deadBrokers) (R22): when the leader r is among them, the
\* others (`with`) leave ctrlLive in the same step and the one election skips
\* them all; one epoch, as their OfflineReplica transitions then find them out
\* of the ISR already (where no live ISR member is left, the spec takes them
\* one by one).
ControllerDetectFailure(r) ==
    /\ r \in ctrlLive /\ (r \notin alive \/ LossyNetwork)
    /\ \E with \in IF ctrlLeader = r
                    THEN SUBSET {d \in ctrlLive \ {r} : d \notin alive \/ LossyNetwork}
                    ELSE {{}} :
       LET e == OfflineElection(ctrlIsr \ with, ctrlLive \ ({r} \cup with))
           f == IF with = {} THEN OnBrokerFailure(r)
                ELSE [leader |-> e.leader, isr |-> e.isr, bump |-> TRUE]
           failover == ctrlLeader = r /\ f.leader # NoLeader
       IN
       /\ with # {} => e.elected
       /\ \E twice \in IF failover /\ with = {} THEN BOOLEAN ELSE {FALSE} :
          LET epoch == IF f.bump THEN ctrlEpoch + (IF twice THEN 2 ELSE 1) ELSE ctrlEpoch
          IN  /\ epoch <= MaxEpoch
              /\ ctrlLive' = ctrlLive \ ({r} \cup with)
              /\ ctrlLeader' = f.leader /\ ctrlIsr' = f.isr /\ ctrlEpoch' = epoch
              /\ msgs' = IF f.bump THEN msgs \cup Propagate(ctrlLive', alive, epoch, f.leader, f.isr)
                         ELSE msgs
    /\ Act("ControllerDetectFailure", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, historyVars, removed>>

\* KafkaController.onBrokerStartup for a running broker r whose ZooKeeper
\* session expired (ControllerDetectFailure while it ran): it registers with a
\* new session once it reaches ZooKeeper again.  As for a Restart, the
\* controller sends r the partition's state (an offline one's too, R23), and
\* elects a leader if the partition is offline; r itself keeps its state (its
\* process never stopped).
Reregister(r) ==
    /\ LossyNetwork /\ r \in alive /\ r \notin ctrlLive
    /\ LET live == ctrlLive \cup {r}
           e == OfflineElection(ctrlIsr, live)
           elect == ctrlLeader = NoLeader /\ e.elected
           epoch == IF elect THEN ctrlEpoch + 1 ELSE ctrlEpoch
       IN  /\ epoch <= MaxEpoch
           /\ ctrlLive' = live
           /\ ctrlLeader' = IF elect THEN e.leader ELSE ctrlLeader
           /\ ctrlIsr' = IF elect THEN e.isr ELSE ctrlIsr
           /\ ctrlEpoch' = epoch
           /\ msgs' = msgs
                 \cup {LeaderAndIsr(r, ctrlEpoch, ctrlLeader, ctrlIsr)}
                 \cup (IF elect THEN Propagate(live, alive, epoch, e.leader, e.isr) ELSE {})
    /\ Act("Reregister", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, historyVars, removed>>

\* KafkaController.doControlledShutdown (R20): broker r, asked to stop (SIGTERM),
\* asks the controller first; the controller moves r's leadership to another live
\* ISR member and takes r out of the ISR, as onBrokerFailure would, in a new epoch,
\* and tells every live replica, r included, so r becomes a follower before it
\* stops.  Where no other live ISR member can lead, r keeps leading (the shutdown
\* goes on without moving it).  r stays registered until its process exits (then
\* Crash and ControllerDetectFailure).
ControlledShutdown(r) ==
    /\ ControlledShutdowns /\ r \in alive /\ r \in ctrlLive
    /\ LET f == OnBrokerFailure(r)
       IN  /\ f.bump /\ f.leader # NoLeader /\ ctrlEpoch + 1 <= MaxEpoch
           /\ ctrlLeader' = f.leader /\ ctrlIsr' = f.isr /\ ctrlEpoch' = ctrlEpoch + 1
           /\ msgs' = msgs \cup Propagate(ctrlLive, alive, ctrlEpoch + 1, f.leader, f.isr)
    /\ Act("ControlledShutdown", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, historyVars, removed>>

\* Partition.updateFollowerFetchState in Kafka 2.6.3 (R21): after a follower's
\* fetch is read, the leader checks that it still leads (leaderLogIfLocal)
\* outside leaderIsrUpdateLock and only then takes the lock to recompute the HW.
\* A LeaderAndIsr that makes r a follower in between empties its ISR, so the
\* recomputation lets r's HW rise towards its own LEO (any remote replica that
\* caught up within replica.lag.time.max.ms still bounds it): a follower's HW
\* above what its old ISR held.  Enabled only in that window: r follows now and
\* its answer, as leader of an older epoch, to a fetch is still in flight (the
\* answer is sent after the recomputation).  Kafka 2.8.0 takes the lock first
\* (KAFKA-9263).
DeposedLeaderIncrementHw(r) ==
    /\ DeposedLeaderHwRace /\ r \in alive /\ leader[r] # r
    /\ \E m \in msgs : /\ m.type = "FetchResponse" /\ m.src = r /\ m.error = "NONE"
                       /\ m.epoch < leaderEpoch[r]
    /\ \E h \in (hw[r] + 1)..LEO(r) : hw' = [hw EXCEPT ![r] = h]
    /\ Act("DeposedLeaderIncrementHw", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<log, epochCache, recoveryPoint, leaderEpoch, leader, fetchState, isr,
                   remoteLeo, clusterVars, historyVars, removed>>

\* Election.leaderForPreferredReplica / an admin election (ElectLeaders): the
\* controller makes l leader in a new epoch.  Clean: l is a live ISR member
\* and the ISR stays.  Unclean (when enabled) only as Kafka 2.6.3 does it: for
\* a partition whose leader is not live, when no ISR member is live either,
\* the offline election picks the first live replica, alone in the ISR.  (The
\* controller has then already tried that election when the leader died or a
\* broker came back, so this adds a step only where those could not elect.)
ControllerElectLeader(l) ==
    /\ l \in ctrlLive /\ ctrlEpoch < MaxEpoch
    /\ \/ l \in ctrlIsr
       \/ /\ Election = "unclean" /\ ctrlLeader \notin ctrlLive
          /\ ctrlIsr \cap ctrlLive = {} /\ l = Min(ctrlLive)
    /\ ctrlIsr' = IF l \in ctrlIsr THEN ctrlIsr ELSE {l}
    /\ ctrlLeader' = l
    /\ ctrlEpoch' = ctrlEpoch + 1
    /\ msgs' = msgs \cup Propagate(ctrlLive, alive, ctrlEpoch + 1, l, ctrlIsr')
    /\ Act("ControllerElectLeader", [replica |-> l])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, historyVars, removed>>

-----------------------------------------------------------------------------
(* Faults *)

\* What a replica forgets when its process stops: its role, its fetcher, its
\* waiting produces, and the messages on their way to it.  The log, the HW
\* checkpoint and the epoch cache are on disk.  Messages it already sent stay
\* in flight.  The controller learns of it only through ControllerDetectFailure.
StopReplica(r) ==
    /\ alive' = alive \ {r}
    /\ leaderEpoch' = [leaderEpoch EXCEPT ![r] = NotHosted]
    /\ leader' = [leader EXCEPT ![r] = NoLeader]
    /\ fetchState' = [fetchState EXCEPT ![r] = "Idle"]
    /\ isr' = [isr EXCEPT ![r] = {}]
    /\ remoteLeo' = [remoteLeo EXCEPT ![r] = [f \in Replicas |-> -1]]
    /\ pending' = {p \in pending : p.replica # r}
    /\ msgs' = {m \in msgs : m.dst # r}

\* A process crash (kill -9): the page cache survives, so no data is lost; the
\* HW in memory is, and a restart reads the last HW checkpoint.
Crash(r) ==
    /\ r \in alive /\ crashes < MaxCrashes
    /\ crashes' = crashes + 1
    /\ StopReplica(r)
    /\ Act("Crash", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, logDirOffline, incarnation, ctrlLive,
                   ctrlLeader,
                   ctrlEpoch, ctrlIsr, nextRecord, acked, committed, uncleanShutdowns, removed>>

\* A power loss: the log keeps only what was flushed (below the recovery point,
\* or its log start offset, which is checkpointed); log recovery trims the epoch
\* cache and the HW to match.  Like the Log
\* constructor (truncateFromEnd), it drops every epoch that starts at or past
\* the LEO, also when the whole log was flushed.
UncleanShutdown(r) ==
    /\ r \in alive /\ uncleanShutdowns < MaxUncleanShutdowns
    /\ uncleanShutdowns' = uncleanShutdowns + 1
    /\ StopReplica(r)
    /\ IF Max2(recoveryPoint[r], LogStart(r)) < LEO(r)
       THEN Truncate(r, Max2(recoveryPoint[r], LogStart(r)), "unclean-shutdown")
       ELSE /\ epochCache' = [epochCache EXCEPT ![r] = TruncateFromEnd(@, LEO(r))]
            /\ hw' = [hw EXCEPT ![r] = Min2(@, LEO(r))]
            /\ UNCHANGED <<log, recoveryPoint, removed>>
    /\ Act("UncleanShutdown", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr, nextRecord,
                   acked,
                   committed, crashes>>

\* The broker's log dir fails (an IOException: LogDirFailureChannel.
\* maybeAddOfflineLogDir).  Until the broker halts (HaltOnLogDirFailure), no
\* write reaches its log: every request for its Partition is answered
\* KAFKA_STORAGE_ERROR (RequestError), its leader's work stops (a produce is
\* refused, the ISR is not shrunk, no record is deleted, nothing is flushed),
\* and its fetcher marks the Partition failed where it would have appended or
\* truncated (AbstractFetcherThread's KafkaStorageException), backs off where
\* the out-of-range reset would have truncated, and sends no FETCH.  It counts
\* as a crash.
FailLogDir(r) ==
    /\ LogDirFailures /\ r \in alive /\ r \notin logDirOffline /\ crashes < MaxCrashes
    /\ crashes' = crashes + 1
    /\ logDirOffline' = logDirOffline \cup {r}
    /\ Act("FailLogDir", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, incarnation, ctrlLive, ctrlLeader, ctrlEpoch, ctrlIsr,
                   msgs, nextRecord, pending, acked, committed, uncleanShutdowns, removed>>

\* LogManager.handleLogDirFailure: no live log dir is left (a broker of one log
\* dir), so the broker halts (Exit.halt): a crash; its log stays on the failed dir.
HaltOnLogDirFailure(r) ==
    /\ r \in alive /\ r \in logDirOffline
    /\ StopReplica(r)
    /\ Act("HaltOnLogDirFailure", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<log, hw, epochCache, recoveryPoint, logDirOffline, incarnation, ctrlLive,
                   ctrlLeader, ctrlEpoch, ctrlIsr, nextRecord, acked, committed, crashes,
                   uncleanShutdowns, removed>>

\* The broker comes back and registers (KafkaController.onBrokerStartup), with
\* its log dir back if it had failed (repaired, its data intact).  It
\* loads its log first (the Log constructor): the epoch cache keeps no epoch that
\* starts at or past the LEO (truncateFromEnd), so a leader's epoch without
\* records is forgotten.  Its HW is its last HW checkpoint, which may be older
\* than the HW it had (Partition.createLog), kept between its log start offset
\* and its LEO (Log.updateHighWatermark).  A
\* controller that still saw its old session treats the restart as a bounce:
\* onBrokerFailure first.  It then sends the broker the partition's state, an
\* offline partition's too (leader NoLeader: the OnlineReplica transition sends
\* whatever leader there is, and the broker hosts the Partition, so its HW stays
\* in its checkpoint file; R23), and, if the partition is offline, runs the
\* offline election, which the broker may now win.
Restart(r) ==
    /\ r \notin alive
    /\ LET f == IF r \in ctrlLive THEN OnBrokerFailure(r)
                ELSE [leader |-> ctrlLeader, isr |-> ctrlIsr, bump |-> FALSE]
           bounced == IF f.bump THEN ctrlEpoch + 1 ELSE ctrlEpoch
           live == ctrlLive \cup {r}
           e == OfflineElection(f.isr, live)
           elect == f.leader = NoLeader /\ e.elected
           epoch == IF elect THEN bounced + 1 ELSE bounced
       IN  /\ epoch <= MaxEpoch
           /\ alive' = alive \cup {r}
           /\ logDirOffline' = logDirOffline \ {r}
           /\ incarnation' = [incarnation EXCEPT ![r] = @ + 1]
           /\ ctrlLive' = live
           /\ ctrlLeader' = IF elect THEN e.leader ELSE f.leader
           /\ ctrlIsr' = IF elect THEN e.isr ELSE f.isr
           /\ ctrlEpoch' = epoch
           /\ msgs' = msgs
                 \cup (IF f.bump THEN Propagate(ctrlLive \ {r}, alive, bounced, f.leader, f.isr) ELSE {})
                 \cup {LeaderAndIsr(r, bounced, f.leader, f.isr)}
                 \cup (IF elect THEN Propagate(live, alive \cup {r}, epoch, e.leader, e.isr) ELSE {})
    /\ epochCache' = [epochCache EXCEPT ![r] = TruncateFromEnd(@, LEO(r))]
    /\ hw' = [hw EXCEPT ![r] = Max2(LogStart(r), Min2(hwCheckpoint[r], LEO(r)))]
    /\ Act("Restart", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<log, recoveryPoint, leaderEpoch, leader, fetchState, isr, remoteLeo,
                   historyVars, removed>>

\* ReplicaManager.checkpointHighWatermarks, the highwatermark-checkpoint task:
\* every replica.high.watermark.checkpoint.interval.ms (5 s) from its first
\* LeaderAndIsr, and on a clean shutdown, a running broker writes the HW of
\* each Partition it hosts to its replication-offset-checkpoint file, unless
\* the Partition is offline (its log dir failed).  Without a crash or a power
\* loss to come, no Restart reads it.
CheckpointHighWatermarks(r) ==
    /\ r \in alive /\ r \notin logDirOffline /\ leaderEpoch[r] # NotHosted
    /\ hwCheckpoint[r] # hw[r]
    /\ crashes < MaxCrashes \/ uncleanShutdowns < MaxUncleanShutdowns
    /\ hwCheckpoint' = [hwCheckpoint EXCEPT ![r] = hw[r]]
    /\ Act("CheckpointHighWatermarks", [replica |-> r])
    /\ UNCHANGED <<replicaVars, clusterVars, historyVars, removed>>

\* Log.flush: the replica's log is durable up to its LEO (a failed log dir
\* flushes nothing).
Flush(r) ==
    /\ MaxUncleanShutdowns > 0   \* without power losses flushing changes nothing
    /\ r \in alive /\ r \notin logDirOffline /\ recoveryPoint[r] < LEO(r)
    /\ recoveryPoint' = [recoveryPoint EXCEPT ![r] = LEO(r)]
    /\ Act("Flush", [replica |-> r])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<log, hw, epochCache, leaderEpoch, leader, fetchState, isr, remoteLeo,
                   clusterVars, historyVars, removed>>

\* The network loses a message.
LoseMessage(m) ==
    /\ LossyNetwork /\ m \in msgs
    /\ Consume(m)
    /\ Act("LoseMessage", [from |-> m.src, to |-> m.dst])
    /\ UNCHANGED hwCheckpoint
    /\ UNCHANGED <<replicaVars, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch,
                   ctrlIsr, historyVars, removed>>

-----------------------------------------------------------------------------

Next ==
    \/ \E r \in Replicas :
          \/ \E acks \in ProducerAcks : Produce(r, acks)
          \/ FollowerSendFetch(r)
          \/ FollowerTruncateToHighWatermark(r)
          \/ FollowerSendOffsetsForLeaderEpoch(r)
          \/ ControllerDetectFailure(r)
          \/ ControllerElectLeader(r)
          \/ Reregister(r)
          \/ ControlledShutdown(r)
          \/ DeposedLeaderIncrementHw(r)
          \/ Crash(r)
          \/ UncleanShutdown(r)
          \/ FailLogDir(r)
          \/ HaltOnLogDirFailure(r)
          \/ Restart(r)
          \/ Flush(r)
          \/ CheckpointHighWatermarks(r)
          \/ \E out \in SUBSET Replicas : LeaderShrinkIsr(r, out)
          \/ \E offset \in 0..MaxRecords : DeleteRecords(r, offset)
    \/ \E m \in msgs :
          \/ LeaderHandleFetch(m)
          \/ FollowerHandleFetchResponse(m)
          \/ LeaderHandleOffsetsForLeaderEpoch(m)
          \/ FollowerHandleOffsetsForLeaderEpochResponse(m)
          \/ LeaderHandleListOffsets(m)
          \/ FollowerHandleListOffsetsResponse(m)
          \/ BecomeLeaderOrFollower(m)
          \/ LoseMessage(m)
    \/ \E p \in pending : ExpireDelayedProduce(p)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Fairness: what a running cluster keeps doing.  Produces, faults and admin  *)
(* elections are the environment's and need not happen; the steps below are  *)
(* the brokers' and the controller's own work, which Kafka keeps doing as     *)
(* long as it can (LivenessReplication.cfg checks the properties under it).   *)

\* A message handled by its receiver: KafkaApis.handle for a broker's requests,
\* the fetcher thread for its answers, ReplicaManager.becomeLeaderOrFollower
\* for the controller's LeaderAndIsr.
Handle(m) ==
    \/ LeaderHandleFetch(m)
    \/ FollowerHandleFetchResponse(m)
    \/ LeaderHandleOffsetsForLeaderEpoch(m)
    \/ FollowerHandleOffsetsForLeaderEpochResponse(m)
    \/ LeaderHandleListOffsets(m)
    \/ FollowerHandleListOffsetsResponse(m)
    \/ BecomeLeaderOrFollower(m)

MessageTypes == {"FetchRequest", "FetchResponse", "OffsetsForLeaderEpochRequest",
                 "OffsetsForLeaderEpochResponse", "ListOffsetsRequest",
                 "ListOffsetsResponse", "LeaderAndIsr"}

\* Weak fairness of each replica's fetcher thread (AbstractFetcherThread.doWork),
\* of a leader's isr-expiration task (Partition.maybeShrinkIsr), of the
\* controller noticing a failure (KafkaController.onBrokerFailure), of a broker
\* whose log dir failed halting, of a dead broker being restarted, and of the
\* delivery of each link's messages of each type (per sender, receiver and
\* type, so that no link starves another).
Fairness ==
    /\ \A r \in Replicas :
          /\ WF_vars(FollowerSendFetch(r))
          /\ WF_vars(FollowerTruncateToHighWatermark(r))
          /\ WF_vars(FollowerSendOffsetsForLeaderEpoch(r))
          /\ WF_vars(\E out \in SUBSET Replicas : LeaderShrinkIsr(r, out))
          /\ WF_vars(ControllerDetectFailure(r))
          /\ WF_vars(HaltOnLogDirFailure(r))
          /\ WF_vars(Restart(r))
    /\ \A s \in Replicas \cup {Controller}, d \in Replicas, t \in MessageTypes :
          WF_vars(\E m \in msgs : m.src = s /\ m.dst = d /\ m.type = t /\ Handle(m))

FairSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(* Properties, each named for what it protects *)

States == {"Idle", "Truncating", "Fetching", "Failed"}
Entry == [epoch : 0..MaxEpoch, record : 1..MaxRecords] \cup {Deleted}

TypeOK ==
    /\ \A r \in Replicas :
         /\ log[r] \in Seq(Entry)
         /\ hw[r] \in Nat
         /\ hwCheckpoint[r] \in Nat
         /\ recoveryPoint[r] \in 0..LEO(r)
         /\ leaderEpoch[r] \in {NotHosted, NoEpoch} \cup 0..MaxEpoch
         /\ leader[r] \in Replicas \cup {NoLeader}
         /\ fetchState[r] \in States
         /\ isr[r] \subseteq Replicas
         /\ \A f \in Replicas : remoteLeo[r][f] \in -1..MaxRecords
    /\ alive \subseteq Replicas
    /\ logDirOffline \subseteq Replicas
    /\ \A r \in Replicas : incarnation[r] \in 1..(1 + MaxCrashes + MaxUncleanShutdowns)
    /\ ctrlLive \subseteq Replicas
    /\ ctrlLeader \in Replicas \cup {NoLeader} /\ ctrlEpoch \in 0..MaxEpoch
    /\ ctrlIsr \subseteq Replicas
    /\ nextRecord \in 1..(MaxRecords + 1)
    /\ acked \subseteq 1..MaxRecords

\* The leader elected by the controller, once it has taken office.
InOffice(l) == l \in alive /\ l = ctrlLeader /\ leader[l] = l /\ leaderEpoch[l] = ctrlEpoch

\* HW <= LEO on every replica.
HighWatermarkWithinLog == \A r \in Replicas : hw[r] <= LEO(r)

\* A client deleted the record at offset o: it is below some replica's log start
\* offset.  Kafka keeps no copy of such a record, only the promise that no
\* offset is read as two records (ConsistentReads).
DeletedOffset(o) == \E r \in Replicas : o < LogStart(r)

\* Replica r holds committed record c at its offset, unless a client deleted it.
HoldsCommitted(r, c) ==
    (c[1] < LEO(r) /\ log[r][c[1] + 1].record = c[2]) \/ DeletedOffset(c[1])

\* A record acknowledged to a producer is in the log of the leader in office,
\* unless a client deleted it.
AckedRecordsNeverLost ==
    \A l \in Replicas : InOffice(l) =>
        \A rec \in acked :
            rec \in RecordsOf(l) \/ \E c \in committed : c[2] = rec /\ DeletedOffset(c[1])

\* Every ISR member holds every committed record at its offset ("strong ISR").
CommittedRecordsOnIsr == \A r \in ctrlIsr : \A c \in committed : HoldsCommitted(r, c)

\* A record a consumer read below a HW is never changed: no offset is ever
\* committed with two records, and the leader in office still holds them all.
ConsistentReads ==
    /\ \A a, b \in committed : a[1] = b[1] => a[2] = b[2]
    /\ \A l \in Replicas : InOffice(l) => \A c \in committed : HoldsCommitted(l, c)

\* Two logs that agree on the epoch at an offset agree on the whole prefix,
\* wherever both still hold a record.
LogMatching ==
    \A r1, r2 \in Replicas :
        \A o \in 0..(Min2(LEO(r1), LEO(r2)) - 1) :
            log[r1][o + 1].epoch = log[r2][o + 1].epoch
                => Agree(log[r1], log[r2], o + 1)

\* Once truncation is done, a follower's log is a prefix of its leader's.
FollowersMatchLeader ==
    \A f, l \in Replicas :
        (/\ f # l /\ {f, l} \subseteq alive /\ fetchState[f] = "Fetching"
         /\ leader[f] = l /\ leader[l] = l /\ leaderEpoch[f] = leaderEpoch[l])
            => LEO(f) <= LEO(l) /\ Agree(log[f], log[l], LEO(f))

\* The epoch cache is ordered: epochs rise, start offsets do not fall.
EpochCacheOrdered ==
    \A r \in Replicas : \A i \in 1..(Len(epochCache[r]) - 1) :
        /\ epochCache[r][i].epoch < epochCache[r][i + 1].epoch
        /\ epochCache[r][i].startOffset <= epochCache[r][i + 1].startOffset

\* The epoch cache describes the log (R2, R4): every record still in a log has
\* the epoch of the last cache entry that starts at or below its offset.  A
\* follower whose cache keeps an epoch its log has no record of (KAFKA-10706)
\* breaks it.
EpochCacheMatchesLog ==
    \A r \in Replicas : \A o \in 0..(LEO(r) - 1) :
        log[r][o + 1] # Deleted =>
            LET at == {i \in DOMAIN epochCache[r] : epochCache[r][i].startOffset <= o}
            IN  at # {} /\ epochCache[r][Max(at)].epoch = log[r][o + 1].epoch

\* Leader epochs only grow: the controller's, and each running replica's.
LeaderEpochsOnlyGrow ==
    [][/\ ctrlEpoch' >= ctrlEpoch
       /\ \A r \in alive \cap alive' : leaderEpoch'[r] >= leaderEpoch[r]]_vars

\* Within a leader's epoch a follower joins its ISR only from a fetch at or past
\* the leader's HW and the start of the leader's epoch (R11): the ISR expansion
\* guard, which KAFKA-7128 (the seeded bug "no-leso-guard") lacks.  The fetch
\* offset is the follower's LEO the leader records (remoteLeo').
IsrJoinsCaughtUp ==
    [][\A l \in Replicas :
          (leader[l] = l /\ leader'[l] = l /\ leaderEpoch'[l] = leaderEpoch[l]) =>
              \A f \in isr'[l] \ isr[l] : remoteLeo'[l][f] >= Max2(hw[l], Leso(l))]_vars

-----------------------------------------------------------------------------
(* Reachability witnesses: each is violated exactly when an interesting state *)
(* is reached, so a config that expects the violation proves it is reached.  *)

\* No record has been committed and acknowledged with acks=-1 through the HW.
NeverCommitted == \A rec \in acked : \A c \in committed : c[2] # rec

\* No leader elected after the first holds a record acknowledged in epoch 0 (by
\* the first leader): no acknowledged record has yet survived a leader change.
NeverAckedOnNewLeader ==
    \A l \in Replicas : InOffice(l) /\ l # FirstLeader =>
        \A o \in DOMAIN log[l] : ~(log[l][o].epoch = 0 /\ log[l][o].record \in acked)

\* No follower has truncated records after a leader change.
NeverTruncatedAfterLeaderChange ==
    ~(ctrlEpoch > 0 /\ \E x \in removed : x.cause = "truncation")

\* No unclean shutdown has lost a record.
NeverLostToUncleanShutdown == \A x \in removed : x.cause # "unclean-shutdown"

\* No follower has reset its fetch position with LIST_OFFSETS (R9): none fetched
\* past its leader's LEO.
NeverResetOutOfRange == action.name # "FollowerHandleListOffsetsResponse"

\* No follower has dropped its whole log to start at its leader's log start
\* offset (R9): none fell behind records a client deleted.
NeverStartedAtLeaderLogStart ==
    ~(action.name = "FollowerHandleListOffsetsResponse"
      /\ \E r \in Replicas : LEO(r) > 0 /\ LogStart(r) = LEO(r) /\ epochCache[r] = <<>>)

\* No broker is down with a HW ahead of its HW checkpoint (whose Restart would
\* read an older HW than it had).
NeverDownWithStaleCheckpoint ==
    \A r \in Replicas \ alive : Min2(hw[r], LEO(r)) <= hwCheckpoint[r]

\* No running broker hosts a Partition without a leader epoch (a restarted broker
\* whose first LeaderAndIsr names no leader does).
NeverHostedWithoutEpoch == \A r \in alive : leaderEpoch[r] # NoEpoch

\* No follower has been answered KAFKA_STORAGE_ERROR by a leader whose log dir
\* failed (before it halts).
NeverAnsweredStorageError ==
    ~\E m \in msgs : m.type = "FetchResponse" /\ m.error = "KAFKA_STORAGE_ERROR"

\* No controller has failed over a dead leader (R19): no ControllerDetectFailure
\* took it offline and then elected, two leader epochs in one step.  An action
\* property, so the step itself is seen.
NeverFailsOver ==
    [][~(action'.name = "ControllerDetectFailure" /\ ctrlEpoch' = ctrlEpoch + 2)]_vars

-----------------------------------------------------------------------------
(* Liveness (under FairSpec), each named for the progress it protects *)

\* The controller's leader runs, leads at the controller's epoch, and every
\* replica holds its log and HW (the liveness configs delete no records).
Replicated ==
    /\ ctrlLeader \in alive
    /\ leader[ctrlLeader] = ctrlLeader /\ leaderEpoch[ctrlLeader] = ctrlEpoch
    /\ \A r \in Replicas : r \in alive /\ log[r] = log[ctrlLeader] /\ hw[r] = hw[ctrlLeader]

\* The model's epoch bound, not Kafka, stops the controller: a broker is down and
\* its restart needs a leader epoch past MaxEpoch (for the failure the
\* controller has not yet handled, or for the election the restart brings;
\* noticing the failure needs no later epoch than the restart).  Only a run
\* that ends with a restart blocked for good is excused: one in which the bound
\* never blocks the controller, or blocks it only for a while, is not.
OutOfEpochs == \E r \in Replicas \ alive : ~ENABLED Restart(r)

\* Once the faults are over, replication catches up for good: every replica
\* holds the leader's log and HW (R9, R10, R13), unless the model ran out of epochs.
EventuallyReplicated == <>[](Replicated \/ OutOfEpochs)

\* Every acks=-1 produce waiting in a purgatory is answered (an ack, or an
\* error when it expires or its leader stops): none waits forever (R14, R17).
EventuallyAnswered == \A p \in [record : 1..MaxRecords, replica : Replicas, offset : 0..MaxRecords - 1] :
    (p \in pending) ~> (p \notin pending)

=============================================================================
