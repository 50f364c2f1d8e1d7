"""`gather mode=batch` against the fake judge's Batch API over real HTTP: the same llm.csv as online, the
documented request shapes, failed lines, an expired batch, results made elsewhere, and resuming after a
kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, make_conversations

from calibration.cli import main
from rubric.conversations import save_conversations
from rubric.judge.batch.lines import ID_SUFFIX, split_lines

BENCH = ROOT / "data" / "role_adherence"


def args(server, out, *extra, conversations=None):
    return [
        f"conversations={conversations or out.parent / 'conversations.jsonl'}",
        f"out={out}",
        "judge=fake",
        f"judge.base_url={server.base_url}",
        "judge.backoff=0.01",
        "progress=false",
        "batch.poll_s=0.02",
        *extra,
    ]


@pytest.fixture
def convs(tmp_path):
    return save_conversations(make_conversations(4, 3), tmp_path / "conversations.jsonl")  # 60 pairs


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def state(out):
    return json.loads((out / "batch/state.json").read_text())


def run_like_vllm(server, inputs, results, faults=()):
    """What vLLM's run_batch writes for these batch files: one output line per request."""
    server.faults.extend(faults)
    rows = []
    for path in inputs:
        for n, line in enumerate(lines(path)):
            fault = server.faults.popleft() if server.faults else None
            status, body = server.answer(line["url"], line["body"], fault)
            rows.append(
                {
                    "id": f"vllm-{n}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": status, "request_id": f"r{n}", "body": body},
                    "error": None,
                }
            )
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_benchmark_batch_and_online_write_identical_llm_csv(server, tmp_path, capsys):
    server.keep_bodies = True
    online, batch = tmp_path / "online", tmp_path / "batch"
    assert main(["gather", *args(server, online, conversations=BENCH)]) == 0
    online_bodies = list(server.bodies)
    server.requests = 0
    assert main(["gather", *args(server, batch, "mode=batch", conversations=BENCH)]) == 0
    assert (batch / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()
    llm = pd.read_csv(batch / "llm.csv")
    assert len(llm) == len(online_bodies) * 4 and len(online_bodies) > 2000
    # the batch file carries exactly the bodies the online gather sent (a prompt that occurs twice in the
    # benchmark once: one cache key), with ids naming item and question
    sent = lines(batch / "batch/input-000.jsonl")
    unique = {json.dumps(b, sort_keys=True) for b in online_bodies}
    assert sorted(json.dumps(s["body"], sort_keys=True) for s in sent) == sorted(unique)
    assert len(online_bodies) - len(sent) == 5
    first = llm.iloc[0]
    assert sent[0]["custom_id"].startswith(
        f"{first.conversation_id}|{first.turn}|{first.question_id}|{first.prompt_hash}|"
    )
    assert {(s["method"], s["url"]) for s in sent} == {("POST", "/v1/chat/completions")}
    # the Batch API calls, in the documented shapes
    calls = server.batch_api.calls
    assert calls[0] == ("POST", "/v1/files", {"purpose": "batch"})
    method, path, body = calls[1]
    assert (method, path) == ("POST", "/v1/batches")
    assert body["input_file_id"] == "file-000001" and body["endpoint"] == "/v1/chat/completions"
    assert body["completion_window"] == "24h" and body["metadata"]["created_by"] == "role-rubric"
    assert ("GET", "/v1/batches/batch_000001", None) in calls
    assert calls[-1] == ("GET", "/v1/files/file-000002/content", None)
    assert server.batch_api.contents["file-000001"] == (batch / "batch/input-000.jsonl").read_bytes()
    assert server.answered["batch_line"] == len(sent)
    summary = json.loads((batch / "gather_summary.json").read_text())
    assert summary["answered"] == len(sent) and summary["failures"] == 0
    # a rerun, batch or online, reads everything from the cache
    before = server.requests
    assert main(["gather", *args(server, batch, "mode=batch", conversations=BENCH)]) == 0
    assert main(["gather", *args(server, batch, conversations=BENCH)]) == 0
    assert server.requests == before
    assert (batch / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()


def test_files_split_at_the_limits_and_submit_false_writes_files_only(server, tmp_path, convs, capsys):
    out = tmp_path / "out"
    assert main(["gather", *args(server, out, "mode=batch", "submit=false", "batch.max_requests=25")]) == 0
    names = sorted(p.name for p in (out / "batch").glob("*.jsonl"))
    assert names == ["input-000.jsonl", "input-001.jsonl", "input-002.jsonl"]
    assert [len(lines(out / "batch" / n)) for n in names] == [25, 25, 10]
    assert server.requests == 0 and not (out / "llm.csv").exists()
    printed = capsys.readouterr().out
    assert "vllm.entrypoints.openai.run_batch -i" in printed and "--model fake-judge" in printed
    parts = [b"x" * 9 + b"\n"] * 7
    assert [len(f) for f in split_lines(iter(parts), 3, 10**6)] == [3, 3, 1]
    assert [len(f) for f in split_lines(parts, 100, 25)] == [2, 2, 2, 1]


def test_results_from_elsewhere_match_online(server, tmp_path, convs):
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online)]) == 0
    assert main(["gather", *args(server, out, "mode=batch", "submit=false", "batch.max_requests=25")]) == 0
    results = tmp_path / "vllm_out"  # one results file per batch file, as run_batch writes them
    results.mkdir()
    for n in range(3):
        run_like_vllm(server, [out / f"batch/input-00{n}.jsonl"], results / f"out-{n}.jsonl")
    before = server.requests
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 0
    assert server.requests == before
    assert (out / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()


def test_failed_lines_go_to_failures_csv_and_a_rerun_sends_only_them(server, tmp_path, convs, capsys):
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online)]) == 0
    server.faults.extend(["500", "500", "500"])
    assert main(["gather", *args(server, out, "mode=batch", "batch.max_requests=25")]) == 3
    assert len(server.batch_api.batches) == 3  # one per file
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "3 of 60 requests failed in the batch" in err
    failures = pd.read_csv(out / "failures.csv", keep_default_na=False)
    assert len(failures) == 3 and failures["error"].str.contains("HTTP 500").all()
    sent = {r["custom_id"] for n in range(3) for r in lines(out / f"batch/input-00{n}.jsonl")}
    assert set(failures["custom_id"]) <= sent  # the line to look for in the batch's files
    assert len(pd.read_csv(out / "llm.csv")) == 57 * 4
    assert main(["gather", *args(server, out, "mode=batch", "batch.max_requests=25")]) == 0
    # only the failed ones were sent again, in files (and custom ids) of the folder's second job
    again = lines(out / "batch/job2-input-000.jsonl")
    assert len(again) == 3 and all(r["custom_id"].endswith("|j2") for r in again)
    assert not (out / "batch/input-000.jsonl").exists() and not (out / "batch/job2-input-001.jsonl").exists()
    assert not (out / "failures.csv").exists()
    assert (out / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()


def test_an_expired_batch_keeps_what_finished(server, tmp_path, convs, capsys):
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online)]) == 0
    server.batch_api.lines_per_poll, server.batch_api.expire_after_polls = 20, 2
    assert main(["gather", *args(server, out, "mode=batch")]) == 3
    assert "batch batch_000001 expired" in capsys.readouterr().out
    failures = pd.read_csv(out / "failures.csv")
    assert len(failures) == 20 and failures["error"].str.contains("batch_expired").all()
    server.batch_api.expire_after_polls = None
    assert main(["gather", *args(server, out, "mode=batch")]) == 0
    assert (out / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()


def test_no_option_is_re_asked_in_a_second_round(server, tmp_path, convs):
    out = tmp_path / "out"
    server.faults.extend(["no_option", "no_option"])
    server.faults.extend([None] * 58 + ["no_option"])  # the second round: one of the two names none again
    assert main(["gather", *args(server, out, "mode=batch")]) == 0
    reasks = lines(out / "batch/reask1-000.jsonl")
    assert len(reasks) == 2 and all(r["custom_id"].endswith("|r1") for r in reasks)
    assert "Reply with exactly one option code" in reasks[0]["body"]["messages"][-1]["content"]
    summary = json.loads((out / "gather_summary.json").read_text())
    assert summary["fallbacks"] == 1 and summary["batch_requests"] == 62  # 60 + 2 re-asks
    assert summary["mode"] == "batch" and summary["http_requests"] == 0  # no request went out over HTTP here
    assert [(r["round"], r["inputs"]) for r in summary["batch"]["rounds"]] == [
        (0, ["input-000.jsonl"]),
        (1, ["reask1-000.jsonl"]),
    ]
    assert [Path(p).name for r in summary["batch"]["rounds"] for p in r["results"]] == [
        "input-000.output.jsonl",
        "reask1-000.output.jsonl",
    ]


@pytest.mark.parametrize("damage", ["other_rubric", "truncated"])
def test_bad_results_exit_2_with_one_line_and_nothing_lost(server, tmp_path, convs, capsys, damage):
    out = tmp_path / "out"
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    results = tmp_path / "res.jsonl"
    if damage == "other_rubric":
        other = tmp_path / "other"
        assert main(["gather", *args(server, other, "mode=batch", "submit=false", "rubric=llm_rubric")]) == 0
        run_like_vllm(server, [other / "batch/input-000.jsonl"], results)
    else:
        run_like_vllm(server, [out / "batch/input-000.jsonl"], results)
        results.write_bytes(results.read_bytes()[:-100])
    capsys.readouterr()
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(results) in err
    assert ("match no request" in err) if damage == "other_rubric" else ("truncated" in err and "row 60" in err)
    assert not (out / "llm.csv").exists() and not state(out)["finished"]
    if damage == "truncated":  # the complete file still works
        run_like_vllm(server, [out / "batch/input-000.jsonl"], results)
        assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 0


def test_missing_result_lines_are_failures(server, tmp_path, convs, capsys):
    out = tmp_path / "out"
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    results = tmp_path / "res.jsonl"
    run_like_vllm(server, [out / "batch/input-000.jsonl"], results, faults=["500"])
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:50]))
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 3
    failures = pd.read_csv(out / "failures.csv")
    assert len(failures) == 11 and failures["error"].str.contains("no result for this request").sum() == 10
    # the same results again, now that a second job asks the failed pairs: refused, nothing read, job 2 kept
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 2
    err = capsys.readouterr().err
    assert "these results answer an earlier batch job of this gather (50 lines), none of this job's 11" in err
    assert not state(out)["finished"] and state(out)["job"] == 2
    # the rerun that writes files for elsewhere asks exactly the 11 failed pairs again, in the folder's second job
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    again = lines(out / "batch/job2-input-000.jsonl")
    failed_ids = set(failures["custom_id"])
    assert len(again) == 11 and {r["custom_id"].removesuffix("|j2") for r in again} == failed_ids
    results2 = tmp_path / "res2.jsonl"
    run_like_vllm(server, [out / "batch/job2-input-000.jsonl"], results2)
    assert main(["gather", *args(server, out, "mode=batch", f"results={results2}")]) == 0
    assert not (out / "failures.csv").exists() and len(pd.read_csv(out / "llm.csv")) == 60 * 4


def test_a_batch_created_just_before_a_kill_is_adopted_not_paid_twice(server, tmp_path, convs):
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online)]) == 0
    server.batch_api.lines_per_poll = 10**9
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    # as if killed right after batches.create returned: upload and batch exist, the ids were not recorded
    import openai

    s = state(out)
    data = (out / "batch/input-000.jsonl").read_bytes()
    name = f"role-rubric-{s['files'][0]['sha256'][:16]}-input-000.jsonl"
    with openai.OpenAI(api_key="x", base_url=server.base_url) as client:
        fid = client.files.create(file=(name, data, "application/jsonl"), purpose="batch").id
        client.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h")
    s["files"][0].update(upload_started=True, create_started=True)
    (out / "batch/state.json").write_text(json.dumps(s))
    assert main(["gather", *args(server, out, "mode=batch")]) == 0
    posts = [c for c in server.batch_api.calls if c[0] == "POST"]
    assert len(posts) == 2  # the two made above, none by the resumed gather
    assert (out / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()


KILLED_RUN = "import sys\nfrom calibration.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def test_kill_while_waiting_then_rerun_resumes_the_same_batch(server, tmp_path):
    save_conversations(make_conversations(10, 3), tmp_path / "conversations.jsonl")  # 150 pairs
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online)]) == 0
    server.batch_api.lines_per_poll = 10
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, "gather", *args(server, out, "mode=batch")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = server.batch_api
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if api.batches and api.work["batch_000001"]["at"] >= 50:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert api.batches["batch_000001"]["status"] == "in_progress" and not (out / "llm.csv").exists()
    assert state(out)["files"][0]["batch_id"] == "batch_000001"
    assert main(["gather", *args(server, out, "mode=batch")]) == 0
    assert len(api.batches) == 1 and len(api.files) == 2  # the same batch: input and output files only
    assert server.answered["batch_line"] == 150
    assert (out / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()


def test_batch_keys_are_documented_and_checked(capsys):
    assert main(["gather", "--help"]) == 0
    text = capsys.readouterr().out
    for key in ("mode=online", "submit=true", "results=null", "batch.max_requests=50000", "batch.poll_s"):
        assert key in text
    assert "vLLM's run_batch" in text
    assert main(["gather", "conversations=x", "mode=bulk"]) == 2
    assert "mode='bulk'" in capsys.readouterr().err
    assert main(["gather", "conversations=x", "batch.max_requests=0"]) == 2


@pytest.mark.parametrize(
    "extra",
    [
        ["judge.backend=completions"],
        ["include_reason=true"],
        ["judge.answer_mode=sampled"],
        ["granularity=conversation"],
    ],
)
def test_completions_reasons_and_sampling_match_online(server, tmp_path, convs, extra):
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online, *extra)]) == 0
    assert main(["gather", *args(server, out, "mode=batch", *extra)]) == 0
    for name in ("llm.csv", "reasons.csv"):
        if (online / name).exists():
            assert (out / name).read_bytes() == (online / name).read_bytes()
    url = lines(out / "batch/input-000.jsonl")[0]["url"]
    assert url == ("/v1/completions" if "completions" in extra[0] else "/v1/chat/completions")


def test_a_batch_that_fails_validation_lists_every_request(server, tmp_path, convs, capsys):
    server.batch_api.reject_line = 7
    assert main(["gather", *args(server, tmp_path / "out", "mode=batch")]) == 3
    assert "batch batch_000001 failed" in capsys.readouterr().out
    failures = pd.read_csv(tmp_path / "out/failures.csv")
    assert len(failures) == 60 and failures["error"].str.contains("ended failed: line 7").all()


def test_changed_inputs_or_files_are_refused_before_any_request(server, tmp_path, convs, capsys):
    out = tmp_path / "out"
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    assert main(["gather", *args(server, out, "mode=batch", "rubric=llm_rubric")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not among this gather's requests" in err and "state.json" in err
    assert main(["gather", *args(server, out, "mode=batch", f"results={out / 'batch/input-000.jsonl'}")]) == 2
    assert "batch request (input) line, not a result" in capsys.readouterr().err
    data = out / "batch/input-000.jsonl"
    data.write_bytes(data.read_bytes().replace(b'"temperature": 0.0', b'"temperature": 0.5', 1))
    assert main(["gather", *args(server, out, "mode=batch")]) == 2
    assert "changed after it was written" in capsys.readouterr().err
    assert server.requests == 0 and not server.batch_api.calls
    assert main(["gather", *args(server, out, "results=x.jsonl")]) == 2  # results= is for mode=batch


def test_only_the_address_may_change_between_writing_and_reading_results(server, tmp_path, convs, capsys):
    """The judge's address is no part of its identity (rubric/judge/identity.py): results of files written for one
    judge.base_url are read under another; any other setting still matches nothing."""
    out, online = tmp_path / "out", tmp_path / "online"
    assert main(["gather", *args(server, online)]) == 0
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    results = tmp_path / "res.jsonl"
    run_like_vllm(server, [out / "batch/input-000.jsonl"], results)
    moved = [
        a if not a.startswith("judge.base_url=") else "judge.base_url=http://gpu-box.internal:8000/v1"
        for a in args(server, out, "mode=batch", f"results={results}")
    ]
    assert main(["gather", *moved]) == 0
    assert (out / "llm.csv").read_bytes() == (online / "llm.csv").read_bytes()
    capsys.readouterr()
    assert main(["gather", *args(server, tmp_path / "o2", "mode=batch", "submit=false")]) == 0
    assert (
        main(["gather", *args(server, tmp_path / "o2", "mode=batch", f"results={results}", "judge.top_logprobs=5")])
        == 2
    )
    assert "not among this gather's requests" in capsys.readouterr().err


def test_results_files_that_cannot_be_read_as_given_are_one_line(server, tmp_path, convs, capsys):
    out = tmp_path / "out"
    assert main(["gather", *args(server, out, "mode=batch", "submit=false")]) == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    capsys.readouterr()
    assert main(["gather", *args(server, out, "mode=batch", f"results={empty}")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the results file is empty" in err and str(empty) in err
    # the same request answered twice, differently: both named, nothing read, no silent choice
    results = tmp_path / "res.jsonl"
    run_like_vllm(server, [out / "batch/input-000.jsonl"], results)
    rows = results.read_text().splitlines()
    other = json.loads(rows[0])
    other["response"] = {"status_code": 500, "body": {"error": {"message": "overloaded"}}}
    results.write_text("\n".join([*rows, rows[1], json.dumps(other)]) + "\n")  # row 1 twice: the same, no harm
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 requests have two results that disagree" in err
    assert other["custom_id"] in err and not (out / "llm.csv").exists() and not state(out)["finished"]
    # two runs' outputs concatenated: the same request with other log-probabilities, refused naming both lines
    moved = json.loads(rows[2])
    top = moved["response"]["body"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    top[0]["logprob"], top[3]["logprob"] = top[3]["logprob"], top[0]["logprob"]
    results.write_text("\n".join([*rows, json.dumps(moved)]) + "\n")
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 2
    err = capsys.readouterr().err
    assert f"{results}, row {len(rows) + 1}: 1 requests have two results that disagree" in err, err
    assert f"custom_id {moved['custom_id']!r}, here and at line 3)" in err and not state(out)["finished"]
    results.write_text("\n".join([*rows, rows[1]]) + "\n")
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}")]) == 0


def test_an_echoed_api_key_is_masked_in_failures_and_the_job_record(server, tmp_path, convs):
    key = "sk-live-0123456789abcdefXYZ"
    out = tmp_path / "out"
    assert main(["gather", *args(server, out, "mode=batch", "submit=false", f"judge.api_key={key}")]) == 0
    results = tmp_path / "res.jsonl"
    run_like_vllm(server, [out / "batch/input-000.jsonl"], results)
    rows = [json.loads(r) for r in results.read_text().splitlines()]
    rows[3]["response"] = {"status_code": 401, "body": {"error": {"message": f"Incorrect API key provided: {key}"}}}
    rows[4]["response"] = None
    rows[4]["error"] = {"code": "bad", "message": f"the request carried Authorization: Bearer {key}"}
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["gather", *args(server, out, "mode=batch", f"results={results}", f"judge.api_key={key}")]) == 3
    failures = pd.read_csv(out / "failures.csv", keep_default_na=False)
    assert len(failures) == 2 and failures["error"].str.contains(r"\*\*\*").all()
    assert list(failures["custom_id"]) == [rows[3]["custom_id"], rows[4]["custom_id"]]
    for path in [out / "failures.csv", out / "batch" / "state.json", out / "gather_summary.json"]:
        assert key not in path.read_text(), path


@pytest.mark.parametrize(
    "failing",
    ["lines", "expired", "validation", "reask_round", "reasons"],
)
def test_a_rerun_after_failed_requests_asks_exactly_the_failed_pairs(server, tmp_path, convs, failing):
    """However requests fail on the batch server (lines answered 500, a batch that expires, one refused at
    validation, the lines of a re-ask round, the reasons), the rerun's batch holds exactly the failed pairs'
    requests, once each, and then every pair is answered (issue 61: the third report of a rerun asking none)."""
    out, extra = tmp_path / "out", []
    if failing == "lines":
        server.faults.extend([None] * 7 + ["500"] * 4)
    elif failing == "expired":
        server.batch_api.lines_per_poll, server.batch_api.expire_after_polls = 20, 2
    elif failing == "validation":
        server.batch_api.reject_line = 5
    elif failing == "reask_round":
        server.faults.extend(["no_option"] * 3 + [None] * 57 + ["500", None, "500"])
    else:
        extra = ["include_reason=true"]
        server.faults.extend([None] * 60 + ["500", "500"])
    assert main(["gather", *args(server, out, "mode=batch", *extra)]) == 3
    failed = set(pd.read_csv(out / "failures.csv", keep_default_na=False)["custom_id"])
    server.faults.clear()
    server.batch_api.expire_after_polls = server.batch_api.reject_line = None
    assert main(["gather", *args(server, out, "mode=batch", *extra)]) == 0
    asked = [r["custom_id"].removesuffix("|j2") for r in lines(out / "batch/job2-input-000.jsonl")]
    assert failed and len(asked) == len(set(asked)) and set(asked) == {ID_SUFFIX.sub("", f) for f in failed}
    summary = json.loads((out / "gather_summary.json").read_text())
    assert summary["batch_requests"] == len(failed) and summary["failures"] == 0 and not (out / "failures.csv").exists()
