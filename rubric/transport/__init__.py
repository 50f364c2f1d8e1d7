"""JSON over HTTP for the connectors (`rest`: proxies except loopback, timeouts, safe retries, one-line errors
naming the URL, secrets masked). The judge's own wire (one POST per request, through aiohttp or the openai
client) is rubric/judge/http.py."""
