"""Kept so that `from rubric.fake_server import FakeOpenAI` and `python -m rubric.fake_server` (the paths
the tests, benchmarks and `serve-fake-judge` used before the move) still work: the module is
rubric/servers/fake.py."""

from rubric.servers.fake import FakeOpenAI, codes_in, judge_distribution, main, run_serve

__all__ = ["FakeOpenAI", "codes_in", "judge_distribution", "main", "run_serve"]

if __name__ == "__main__":
    main()
