"""Everything that scores a model: `ajet eval` on the val split (`run`), the Berkeley Function Calling
Leaderboard (`bfcl`, `ajet eval --benchmark bfcl`) and load tests of a serving endpoint (`bench`,
`ajet bench`)."""
