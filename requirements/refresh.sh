#!/usr/bin/env bash
# Re-resolve the locked dependency sets (docs/how-to/dependencies.md). Run from anywhere; needs uv
# (`pip install uv`). Every extra of pyproject.toml but [local] (an sdist that compiles llama.cpp) is resolved
# together into one universal constraints file, valid for every Python the project supports and every platform;
# the trace servers' own environments (Python 3.11 and later, as arize-phoenix 20 needs) get one each. Then run `bash .ci/run` before committing the result.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-uv}
echo "torch==2.13.0" >"${TMPDIR:-/tmp}/role-rubric-torch.txt"  # the CPU wheel the README installs first
"$UV" pip compile pyproject.toml --universal --python-version 3.10 --no-header --quiet \
  -c "${TMPDIR:-/tmp}/role-rubric-torch.txt" \
  --extra dev --extra embedding --extra otel --extra mlflow --extra phoenix --extra deepeval --extra postgres \
  --extra nli --extra docs -o requirements/constraints.txt
for server in mlflow-server phoenix-server label-studio; do
  "$UV" pip compile "requirements/$server.in" --universal --python-version 3.11 --no-header --quiet \
    -o "requirements/$server.txt"
done
for f in requirements/constraints.txt requirements/{mlflow-server,phoenix-server,label-studio}.txt; do
  sed -i "1i # Locked by requirements/refresh.sh on $(date -u +%F) (uv pip compile --universal). Do not edit by hand." "$f"
done
echo "refreshed requirements/constraints.txt, mlflow-server.txt, phoenix-server.txt, label-studio.txt"
