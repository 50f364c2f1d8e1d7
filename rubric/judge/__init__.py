"""The judge client: where the judge is and how to ask it (`settings`), the prompts (`prompts`), the backends
(`backends`: any OpenAI-compatible endpoint; `embedding`: the offline judge; both registered by name in
`registry`), the wire (`http`), checking and reading what comes back (`responses`, `response_reading`,
`extraction`), the request cache (`cache`), the workers (`workers`, `parallel`), batch files (`batch/`), and
the gather stage over all of them (`gather`, writing `outputs`, checked by `health`, `identity`,
`long_turns`).

It imports the foundations (rubric/'s top-level modules), `rubric.config` and `rubric.servers` (the judges
role-rubric runs itself); nothing below it imports it. The public names are re-exported by `rubric`.
"""
