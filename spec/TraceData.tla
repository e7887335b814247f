------------------------------ MODULE TraceData ------------------------------
(***************************************************************************)
(* An example of the data KafkaReplicationTrace validates: one trace of    *)
(* three replicas with only its first state, Init.  `kreplica conform`     *)
(* writes a module of this name for every batch of traces, in a directory *)
(* of its own, and that one is checked instead.                            *)
(***************************************************************************)
EXTENDS Integers, Sequences

TraceLog == <<
  [hidden |-> {"msgs", "removed"},
   events |-> <<
     [e |-> "Init", a |-> <<>>,
      v |-> [log |-> <<<<>>, <<>>, <<>>>>, hw |-> <<0, 0, 0>>,
             hwCheckpoint |-> <<0, 0, 0>>,
             epochCache |-> <<<<[epoch |-> 0, startOffset |-> 0]>>, <<>>, <<>>>>,
             recoveryPoint |-> <<0, 0, 0>>, leaderEpoch |-> <<0, 0, 0>>,
             leader |-> <<1, 1, 1>>, fetchState |-> <<"Idle", "Truncating", "Truncating">>,
             isr |-> <<{1, 2, 3}, {}, {}>>,
             remoteLeo |-> <<<<-1, -1, -1>>, <<-1, -1, -1>>, <<-1, -1, -1>>>>,
             alive |-> {1, 2, 3}, incarnation |-> <<1, 1, 1>>, ctrlLive |-> {1, 2, 3},
             ctrlLeader |-> 1, ctrlEpoch |-> 0, ctrlIsr |-> {1, 2, 3},
             nextRecord |-> 1, pending |-> {}, acked |-> {}, committed |-> {},
             crashes |-> 0, uncleanShutdowns |-> 0]]
   >>]
>>

==============================================================================
