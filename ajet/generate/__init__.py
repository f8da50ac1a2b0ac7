"""`ajet generate`: from an MCP server to training data.

    ajet generate explore --conf X.yaml --out calls.jsonl          calls that really work (no model)
    ajet generate tasks --conf X.yaml -n 200 --out tasks.jsonl     questions written from the tool list
    ajet generate demos --conf X.yaml --tasks tasks.jsonl --out sft.jsonl   teacher episodes, filtered

The question writer and the teacher are an OpenAI-compatible endpoint (`generate.teacher`) or the
run's own model (`--teacher self`, `ajet.generate.endpoint`). Everything generated is written line by
line as it arrives (kept rows to `--out`, dropped ones with their reason to `<out>.dropped.jsonl`),
and a second run with the same `--out` resumes where the first stopped.
"""
