"""Everything that scores a model: `ajet eval` on the val split (`run`), the Berkeley Function Calling
Leaderboard (`bfcl`, `ajet eval --benchmark bfcl`) and load tests of a serving endpoint (`bench`,
`ajet bench`).

The validation pass itself (the val split through the rollout with a ready engine, and its pass@k
report) lives lower, in `ajet.rollout.validation`: the debug backbone runs it between training steps,
and nothing below this package imports it.
"""
