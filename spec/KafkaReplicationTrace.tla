----------------------- MODULE KafkaReplicationTrace -----------------------
(***************************************************************************)
(* Trace validation: does a recorded run of the implementation conform to  *)
(* KafkaReplication?  A trace conforms if its first state is the spec's    *)
(* Init and every later state is a successor, under the logged action with *)
(* the logged arguments, of the state before it.                           *)
(*                                                                         *)
(* Many traces are checked in one TLC run: `trace` picks one in the        *)
(* initial state and `cursor` walks it, so each state of the search is a   *)
(* state of the spec paired with a position in one trace.  A trace whose   *)
(* last event is reached conforms; TLC prints its number.  TLC runs with   *)
(* deadlock checking off: a branch that cannot go on is no verdict, only   *)
(* a dead end (partial observations may leave several branches open).      *)
(*                                                                         *)
(* The traces come from the module TraceData, which defines TraceLog.  The  *)
(* one in spec/ holds a single one-state example; the checker generates    *)
(* one per batch in a directory of its own (kreplica.conformance.          *)
(* validate.tracecheck).  A definition, not a CONSTANT: evaluated once.    *)
(* Each trace is a record                                                  *)
(*   [hidden |-> names of variables it never records,                      *)
(*    events |-> << ev_0, ev_1, ... >>]                                     *)
(* and each event a record                                                 *)
(*   [e |-> action name, a |-> its arguments,                              *)
(*    v |-> the recorded variables whose value changed (all of them in     *)
(*          ev_0), o |-> variables left out of this one state (optional)]. *)
(* A variable that is recorded here and was recorded one event earlier but *)
(* is not in `v` is unchanged: this keeps the generated module small.      *)
(*                                                                         *)
(* Invariants on a trace (`kreplica conform --invariant NAME`): the config *)
(* may set TraceInvariants to names of the spec's state predicates (those   *)
(* `Invariant` knows).  A state of the trace in which one of them is false *)
(* ends its branch, as a mismatch does, and a diagnostic run prints which  *)
(* ones (kreplica-invariant).  So a trace conforms only if some behaviour  *)
(* consumes it whole with every one of them true in every state.           *)
(*                                                                         *)
(* Shared prefixes: the traces of a batch often begin alike (a fuzzer's    *)
(* runs repeat each other).  The Java reader gives a trace whose hidden    *)
(* variables and first events are an earlier trace's up to some event      *)
(* the field s, how many events it shares, and the trace that holds the    *)
(* last of them the fields k, the traces that branch off after each of     *)
(* its events, and n, the events at which a trace that adds no event of    *)
(* its own (a repeat, a prefix) ends.  The search walks each shared event  *)
(* once: it starts in the traces that share nothing (Roots), and goes on   *)
(* from an event into its own trace and into the traces that branch off    *)
(* there (Kids); a trace that shares is entered only where it branches     *)
(* off.  What is printed names the trace that holds the event, and         *)
(* kreplica says it of every trace through it (validate/prefixes.py).  A   *)
(* trace without these fields shares nothing.                              *)
(***************************************************************************)
EXTENDS KafkaReplication, TraceData, TraceAgreement

CONSTANT
    Diagnose    \* TRUE: report every reached step and every mismatching successor

VARIABLES
    trace,      \* which trace of TraceLog this behaviour follows
    cursor      \* the index (0-based) of the last event it has matched

tvVars == <<vars, trace, cursor>>

Events(t) == TraceLog[t].events
Event(t, k) == Events(t)[k + 1]
LastEvent(t) == Len(Events(t)) - 1

\* The sharing of prefixes (see the top): constants, evaluated once.
Field(t, f, default) == IF f \in DOMAIN TraceLog[t] THEN TraceLog[t][f] ELSE default
Roots == {t \in DOMAIN TraceLog : Field(t, "s", 0) = 0}
Kids == [t \in DOMAIN TraceLog |-> Field(t, "k", <<>>)]
Ends == [t \in DOMAIN TraceLog |-> Field(t, "n", {})]

\* The variables event ev does not constrain: never recorded, or left out of it.
Unobserved(t, ev) == TraceLog[t].hidden \cup (IF "o" \in DOMAIN ev THEN ev.o ELSE {})

\* The spec's variables, by name and by value, in the same order.
VarNames == <<"log", "hw", "hwCheckpoint", "epochCache", "recoveryPoint", "leaderEpoch", "leader",
              "fetchState", "isr", "remoteLeo", "alive", "logDirOffline", "incarnation", "ctrlLive",
              "ctrlLeader", "ctrlEpoch", "ctrlIsr", "msgs", "nextRecord", "pending", "acked",
              "committed", "crashes", "uncleanShutdowns", "removed">>
VarValues == <<log, hw, hwCheckpoint, epochCache, recoveryPoint, leaderEpoch, leader, fetchState,
               isr, remoteLeo, alive, logDirOffline, incarnation, ctrlLive, ctrlLeader, ctrlEpoch,
               ctrlIsr, msgs, nextRecord, pending, acked, committed, crashes, uncleanShutdowns,
               removed>>

\* Every variable of the next state agrees with event ev: it has the value ev
\* records (in v), or ev does not observe it, or it is unchanged.
MatchesNext(t, ev) == AllAgree(VarNames, VarValues', VarValues, ev.v, Unobserved(t, ev))

\* Every variable of the current state agrees with the first event.
MatchesInit(t, ev) == AllAgree(VarNames, VarValues, VarValues, ev.v, Unobserved(t, ev))

\* The variables trace t leaves loose: never recorded, or left out of some state.
\* A constant: TLC evaluates it once, before the search.
Loose == [t \in DOMAIN TraceLog |->
             TraceLog[t].hidden \cup
             UNION {IF "o" \in DOMAIN Events(t)[k] THEN Events(t)[k].o ELSE {} :
                    k \in DOMAIN Events(t)}]
LooseAt == [t \in DOMAIN TraceLog |-> {i \in DOMAIN VarNames : VarNames[i] \in Loose[t]}]

\* What tells two states of the search apart (TLC's VIEW): the trace, the
\* position in it, and the values of the variables it leaves loose.  Any other
\* variable is fixed by the trace and the position: the first event records it
\* (MatchesInit), and every later one records it or keeps it unchanged
\* (MatchesNext); `action` is the logged one.  So two states with the same view
\* are the same state, and TLC fingerprints a few values instead of all of them.
TraceView == <<trace, cursor, [i \in LooseAt[trace] |-> VarValues[i]]>>

\* The next state's variables, for the diagnosis of a mismatch.
Successor ==
    [log |-> log', hw |-> hw', hwCheckpoint |-> hwCheckpoint', epochCache |-> epochCache',
     recoveryPoint |-> recoveryPoint', leaderEpoch |-> leaderEpoch', leader |-> leader',
     fetchState |-> fetchState', isr |-> isr', remoteLeo |-> remoteLeo', alive |-> alive',
     logDirOffline |-> logDirOffline', incarnation |-> incarnation', ctrlLive |-> ctrlLive',
     ctrlLeader |-> ctrlLeader', ctrlEpoch |-> ctrlEpoch', ctrlIsr |-> ctrlIsr', msgs |-> msgs',
     nextRecord |-> nextRecord', pending |-> pending', acked |-> acked', committed |-> committed',
     crashes |-> crashes', uncleanShutdowns |-> uncleanShutdowns', removed |-> removed']

Current ==
    [log |-> log, hw |-> hw, hwCheckpoint |-> hwCheckpoint, epochCache |-> epochCache,
     recoveryPoint |-> recoveryPoint, leaderEpoch |-> leaderEpoch, leader |-> leader,
     fetchState |-> fetchState, isr |-> isr, remoteLeo |-> remoteLeo, alive |-> alive,
     logDirOffline |-> logDirOffline, incarnation |-> incarnation, ctrlLive |-> ctrlLive,
     ctrlLeader |-> ctrlLeader, ctrlEpoch |-> ctrlEpoch, ctrlIsr |-> ctrlIsr, msgs |-> msgs,
     nextRecord |-> nextRecord, pending |-> pending, acked |-> acked, committed |-> committed,
     crashes |-> crashes, uncleanShutdowns |-> uncleanShutdowns, removed |-> removed]

ReplicaActions == {"FollowerSendFetch", "FollowerTruncateToHighWatermark",
                   "FollowerSendOffsetsForLeaderEpoch", "ControllerDetectFailure",
                   "ControllerElectLeader", "Reregister", "ControlledShutdown",
                   "DeposedLeaderIncrementHw", "Crash", "UncleanShutdown", "FailLogDir",
                   "HaltOnLogDirFailure", "Restart", "Flush", "CheckpointHighWatermarks"}

\* The spec action named `name`, taken by the replica `r`.
ReplicaAction(name, r) ==
    CASE name = "FollowerSendFetch" -> FollowerSendFetch(r)
      [] name = "FollowerTruncateToHighWatermark" -> FollowerTruncateToHighWatermark(r)
      [] name = "FollowerSendOffsetsForLeaderEpoch" -> FollowerSendOffsetsForLeaderEpoch(r)
      [] name = "ControllerDetectFailure" -> ControllerDetectFailure(r)
      [] name = "ControllerElectLeader" -> ControllerElectLeader(r)
      [] name = "Reregister" -> Reregister(r)
      [] name = "ControlledShutdown" -> ControlledShutdown(r)
      [] name = "DeposedLeaderIncrementHw" -> DeposedLeaderIncrementHw(r)
      [] name = "Crash" -> Crash(r)
      [] name = "UncleanShutdown" -> UncleanShutdown(r)
      [] name = "FailLogDir" -> FailLogDir(r)
      [] name = "HaltOnLogDirFailure" -> HaltOnLogDirFailure(r)
      [] name = "Restart" -> Restart(r)
      [] name = "Flush" -> Flush(r)
      [] name = "CheckpointHighWatermarks" -> CheckpointHighWatermarks(r)

\* The spec action named `name`, taken on the message `m` in flight.
MessageAction(name, m) ==
    CASE name = "LeaderHandleFetch" -> LeaderHandleFetch(m)
      [] name = "FollowerHandleFetchResponse" -> FollowerHandleFetchResponse(m)
      [] name = "LeaderHandleOffsetsForLeaderEpoch" -> LeaderHandleOffsetsForLeaderEpoch(m)
      [] name = "FollowerHandleOffsetsForLeaderEpochResponse" ->
             FollowerHandleOffsetsForLeaderEpochResponse(m)
      [] name = "LeaderHandleListOffsets" -> LeaderHandleListOffsets(m)
      [] name = "FollowerHandleListOffsetsResponse" -> FollowerHandleListOffsetsResponse(m)
      [] name = "BecomeLeaderOrFollower" -> BecomeLeaderOrFollower(m)
      [] name = "LoseMessage" -> LoseMessage(m)

\* Whether message m can be the one the logged message action ev is about, by
\* the arguments ev logs of it: every message action logs its receiver as
\* `replica`, a leader's handler the sender as `follower`, a follower's the
\* sender as `leader`, BecomeLeaderOrFollower the message's epoch and leader,
\* LoseMessage `from` and `to`.  Only a narrowing: the action logs these same
\* values, so any other message would fail LoggedAction's check of `args`.
About(ev, m) ==
    CASE ev.e = "LoseMessage" -> m.src = ev.a.from /\ m.dst = ev.a.to
      [] ev.e = "BecomeLeaderOrFollower" ->
             /\ m.dst = ev.a.replica /\ m.type = "LeaderAndIsr"
             /\ m.epoch = ev.a.epoch /\ m.leader = ev.a.leader
      [] "follower" \in DOMAIN ev.a -> m.dst = ev.a.replica /\ m.src = ev.a.follower
      [] "leader" \in DOMAIN ev.a -> m.dst = ev.a.replica /\ m.src = ev.a.leader
      [] OTHER -> m.dst = ev.a.replica

\* The messages a logged message action can be about.
Candidates(ev) == {m \in msgs : About(ev, m)}

\* A message the logged action received may stay in flight (DuplicatingNetwork:
\* another copy of it is on its way) only where the trace records `msgs`: there
\* the trace says which.  Where it does not, the check assumes no copy is left,
\* since searching for copies nobody sees multiplies the states at every receive.
CopyMayStay(ev, m) == m \in msgs' => "msgs" \notin Unobserved(trace, ev)

\* The logged action with the logged arguments: the spec records both in
\* `action`, so every choice of the spec's parameters that does not give those
\* arguments is ruled out (the candidates are narrowed by them first, for speed).
LoggedAction(ev) ==
    /\ CASE ev.e \in ReplicaActions -> ReplicaAction(ev.e, ev.a.replica)
         [] ev.e = "Produce" -> Produce(ev.a.replica, ev.a.acks)
         [] ev.e = "LeaderShrinkIsr" -> LeaderShrinkIsr(ev.a.replica, ev.a.followers)
         [] ev.e = "DeleteRecords" -> DeleteRecords(ev.a.replica, ev.a.offset)
         [] ev.e = "ExpireDelayedProduce" ->
                \E p \in {p \in pending : p.replica = ev.a.replica /\ p.record = ev.a.record} :
                    ExpireDelayedProduce(p)
         [] OTHER -> \E m \in Candidates(ev) : MessageAction(ev.e, m) /\ CopyMayStay(ev, m)
    /\ action'.name = ev.e
    /\ action'.args = ev.a

\* The spec's state predicates a trace can be checked against, by name
\* (kreplica reads the names from here: a new one needs only its line).  Not
\* TypeOK: its bounds are the model's (MaxEpoch, MaxRecords), which a trace
\* check lifts, and TLC would build the set 0..MaxEpoch to test membership;
\* kreplica checks the types of every trace before TLC reads it.
Invariant(name) ==
    CASE name = "HighWatermarkWithinLog" -> HighWatermarkWithinLog
      [] name = "AckedRecordsNeverLost" -> AckedRecordsNeverLost
      [] name = "CommittedRecordsOnIsr" -> CommittedRecordsOnIsr
      [] name = "ConsistentReads" -> ConsistentReads
      [] name = "LogMatching" -> LogMatching
      [] name = "FollowersMatchLeader" -> FollowersMatchLeader
      [] name = "EpochCacheOrdered" -> EpochCacheOrdered
      [] name = "EpochCacheMatchesLog" -> EpochCacheMatchesLog
      [] name = "NeverCommitted" -> NeverCommitted
      [] name = "NeverAckedOnNewLeader" -> NeverAckedOnNewLeader
      [] name = "NeverTruncatedAfterLeaderChange" -> NeverTruncatedAfterLeaderChange
      [] name = "NeverLostToUncleanShutdown" -> NeverLostToUncleanShutdown
      [] name = "NeverResetOutOfRange" -> NeverResetOutOfRange
      [] name = "NeverStartedAtLeaderLogStart" -> NeverStartedAtLeaderLogStart
      [] name = "NeverDownWithStaleCheckpoint" -> NeverDownWithStaleCheckpoint
      [] name = "NeverHostedWithoutEpoch" -> NeverHostedWithoutEpoch
      [] name = "NeverAnsweredStorageError" -> NeverAnsweredStorageError
      [] name = "Replicated" -> Replicated

\* The invariants every state of the trace must satisfy: none, unless the
\* config sets it (a definition, not a CONSTANT: a config need not name it).
TraceInvariants == {}

\* Those of them that are false in the current state.
Broken == {name \in TraceInvariants : ~Invariant(name)}

\* The branch goes on only if none is false (`broken`) in the state at position
\* `step`; a diagnostic run prints those that are.
InvariantsHold(t, broken, step) ==
    IF broken = {} THEN TRUE
    ELSE Diagnose /\ PrintT(<<"kreplica-invariant", t, step, broken>>) /\ FALSE

-----------------------------------------------------------------------------

\* The first state of trace t is the spec's Init.
TraceInit ==
    /\ trace \in Roots
    /\ cursor = 0
    /\ Init
    /\ IF MatchesInit(trace, Event(trace, 0)) THEN TRUE
       ELSE Diagnose /\ PrintT(<<"kreplica-init-mismatch", trace, Current>>) /\ FALSE
    /\ InvariantsHold(trace, Broken, 0)
    /\ Diagnose => PrintT(<<"kreplica-reached", trace, 0>>)
    /\ LastEvent(trace) = 0 => PrintT(<<"kreplica-conforms", trace>>)
    /\ 0 \in Ends[trace] => PrintT(<<"kreplica-end", trace, 0>>)

\* The next event of trace u is the logged action, and its successor agrees
\* with the recorded variables.  (u is the trace followed so far, or one that
\* branches off it here: both have its hidden variables.)
Step(u) ==
    /\ LET ev == Event(u, cursor + 1) IN
       /\ LoggedAction(ev)
       /\ IF MatchesNext(u, ev) THEN TRUE
          ELSE Diagnose /\ PrintT(<<"kreplica-mismatch", u, cursor + 1, Successor>>) /\ FALSE
    /\ trace' = u
    /\ cursor' = cursor + 1
    /\ InvariantsHold(u, Broken', cursor + 1)
    /\ Diagnose => PrintT(<<"kreplica-reached", u, cursor + 1>>)
    /\ cursor + 1 = LastEvent(u) => PrintT(<<"kreplica-conforms", u>>)
    /\ cursor + 1 \in Ends[u] => PrintT(<<"kreplica-end", u, cursor + 1>>)

\* The next event of the trace, or of a trace that branches off it here.
TraceNext ==
    \/ cursor < LastEvent(trace) /\ Step(trace)
    \/ cursor \in DOMAIN Kids[trace] /\ \E u \in Kids[trace][cursor] : Step(u)

TraceSpec == TraceInit /\ [][TraceNext]_tvVars

=============================================================================
