"""The main job (`kreplica demo`, `make demo`): the whole pipeline end to end, on the embedded
defaults. Model-check the ci suite, fuzz the correct protocol and one seeded bug recording every
run, check every recorded trace against the spec on Spark, draw every counterexample and every
rejected trace, and write one HTML report that links all of it (`pipeline`, `draw`,
`report`). Each step remembers the inputs it ran on; a second run reuses the steps whose inputs
did not change, and says so."""
