"""How the judge's requests travel: `http` (one POST and its reply, through aiohttp or the openai client),
`workers` (bounded-concurrency workers over a backend in this process, and the cache writer) and `parallel`
(the same workers spread over a few processes for a fast endpoint)."""
