---------------------------- MODULE TraceAgreement ----------------------------
(***************************************************************************)
(* The rule by which KafkaReplicationTrace matches a state to a logged     *)
(* event, as one operator over all the variables at once.                  *)
(*                                                                         *)
(* This definition is the reference.  The trace checker also ships a Java  *)
(* override of it (conformance/validate/java/TraceAgreement.java),         *)
(* which TLC uses when the class is beside the spec: it computes the same  *)
(* value without interpreting 23 comparisons per step, and sees that a     *)
(* variable the action left in place is unchanged without comparing its    *)
(* value.  Traces checked as TLA+ modules run without it, and the tests    *)
(* check that both ways give the same verdicts.                            *)
(***************************************************************************)
EXTENDS Integers, Sequences

\* names[i] is the name of a variable, now[i] its value in the state being
\* matched and before[i] its value in the state before; recorded maps the names
\* the event logged to their logged values, and unobserved holds the names the
\* event does not constrain.  A logged variable must have its logged value; one
\* neither logged nor unobserved must be unchanged.
AllAgree(names, now, before, recorded, unobserved) ==
    \A i \in DOMAIN names :
        IF names[i] \in DOMAIN recorded THEN now[i] = recorded[names[i]]
        ELSE names[i] \in unobserved \/ now[i] = before[i]

===============================================================================
