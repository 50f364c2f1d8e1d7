"""The old path of rubric.servers.fake: its names, with a DeprecationWarning (import rubric.servers.fake instead; nothing
in role-rubric imports this one)."""

import warnings

from rubric.servers.fake import FakeOpenAI, codes_in, judge_distribution, main, run_serve

__all__ = ["FakeOpenAI", "codes_in", "judge_distribution", "main", "run_serve"]

warnings.warn("rubric.fake_server is deprecated: import rubric.servers.fake", DeprecationWarning, stacklevel=2)

if __name__ == "__main__":
    main()
