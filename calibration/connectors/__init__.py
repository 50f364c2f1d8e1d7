"""One folder per backend a team's chatbot lives in: its import (sources.py), publish (targets.py) and scorer code."""
