"""The fake OpenAI-protocol judge the tests use: it lives in the package (rubric/servers/fake.py) so that
users can start it too (`role-rubric serve-fake-judge`). Run standalone for benchmarks:
`python tests/rubric/openai_server.py --latency 0.05` prints the port."""

from rubric.servers.fake import FakeOpenAI, codes_in, judge_distribution, main

__all__ = ["FakeOpenAI", "codes_in", "judge_distribution", "main"]

if __name__ == "__main__":
    main()
