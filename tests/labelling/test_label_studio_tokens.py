"""Label Studio's tokens against a server that speaks its token protocol over real HTTP (no patched client):
a personal access token (a JWT refresh token) is exchanged at /api/token/refresh for a short-lived access
token sent as Bearer, and exchanged again once when the server refuses an expired one; a legacy token goes
as `Token ...`. No form of either is ever printed or written, even where the server echoes it back or the
user passes the token itself as token_env=. (The real server checks the same in test_label_studio_server.py.)
"""

from __future__ import annotations

import pandas as pd
import pytest

from calibration.cli import main
from tests.labelling.ls_protocol import LEGACY, REFRESH, LabelStudioLike, annotated_tasks
from tests.labelling.ls_protocol import serve as _serve


@pytest.fixture()
def exported(labelling_dir):
    return annotated_tasks(labelling_dir)


def _pull(labelling_dir, url, out, *extra):
    return main(
        ["import", "source=label-studio", f"data={labelling_dir}", f"url={url}", "project=1", f"out={out}", *extra]
    )


@pytest.mark.parametrize("token", [REFRESH, LEGACY], ids=["personal-access-token", "legacy-token"])
def test_either_token_imports_and_an_expired_access_token_is_renewed(
    labelling_dir, exported, tmp_path, monkeypatch, capsys, token
):
    server = _serve(LabelStudioLike(exported, uses=1))  # every access token expires after one request
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", token)
    try:
        assert _pull(labelling_dir, server.url, tmp_path / "o") == 0
    finally:
        server.shutdown()
    labels = pd.read_csv(tmp_path / "o" / "labels.csv", dtype=str)
    assert sorted(labels["turn"]) == ["0", "1"] and set(labels["judge_id"]) == {"a@x.org"}
    gets = [auth for method, _, auth in server.seen if method == "GET"]
    if token == REFRESH:
        refreshes = [p for m, p, _ in server.seen if m == "POST"]
        assert refreshes == ["/api/token/refresh"] * 2  # the first access token, then one after it expired
        assert all(a.startswith("Bearer eyJ") for a in gets) and len(set(gets)) == 2
    else:
        assert set(gets) == {f"Token {LEGACY}"}
    printed = capsys.readouterr()
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for secret in [token, *server.access]:
        assert secret not in printed.out + printed.err and secret.encode() not in written


def test_a_server_that_echoes_the_tokens_in_its_401_has_them_masked(
    labelling_dir, exported, tmp_path, monkeypatch, capsys
):
    server = _serve(LabelStudioLike(exported, echo=True))
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", REFRESH)
    try:
        assert _pull(labelling_dir, server.url, tmp_path / "o") == 2
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused the API token" in err and "Bearer ***" in err, err
    for secret in [REFRESH, *server.access]:
        assert secret not in err
    assert "personal access token" in err  # the fix names what users have


@pytest.mark.parametrize("given", [REFRESH, LEGACY, "A" + LEGACY], ids=["jwt", "legacy", "legacy-name-like"])
def test_the_token_given_as_token_env_is_refused_and_not_echoed(labelling_dir, tmp_path, capsys, given):
    for argv in (
        ["label-studio", f"data={labelling_dir}", "url=http://127.0.0.1:9"],
        [
            "import",
            "source=label-studio",
            f"data={labelling_dir}",
            "url=http://127.0.0.1:9",
            "project=1",
            f"out={tmp_path / 'o'}",
        ],
    ):
        assert main([*argv, f"token_env={given}"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "token_env" in err and given not in err, err
        assert "not shown" in err
    assert not (tmp_path / "o").exists()
