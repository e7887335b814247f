"""Pictures of traces: a trace as a timeline, one lane per replica, in Kafka's words.

Holds: `timeline` (a trace as frames: each replica's log, HW, LEO, role and ISR at every step,
the controller's view, the wall-clock gap since the step before, the values a real trace did
not observe, and the marks to highlight: an acknowledged record lost, replicas that diverge, an
HW that moves back, an invariant broken), `kafka_words` (each spec action as the Kafka method it
models), `window` (the steps a picture of a long trace shows, its idle fetch round trips
folded), `terminal` (rich), `figure` (PNG and SVG, matplotlib) and `html` (one self-contained
page that steps through the run), `rejection` (a trace's rejection read from `kreplica
conform`'s results, to draw). `kreplica explain` is its command line (docs/explain.md).

May import: `bridge`, `tla` and `errors`.
"""
