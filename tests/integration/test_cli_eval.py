"""``ragpulse eval`` run as a real process on small JSONL files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

from ragpulse._version import __version__
from ragpulse.metrics import METRICS
from ragpulse.offline.evaluate import DEFAULT_MAX_LINE_BYTES
from servers.chat_server import ChatServer, Reply
from servers.rotel_sink import free_port

CONTEXT = "The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall."
GOOD = {
    "id": "good",
    "question": "When was the tower completed?",
    "contexts": [CONTEXT],
    "answer": "The Eiffel Tower was completed in 1889.",
}
BAD = {
    "id": "bad",
    "question": "Who designed it?",
    "contexts": [CONTEXT],
    "answer": "It was designed by a committee of Belgian monks.",
}


def _write(path: Path, *lines: dict[str, Any] | str) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _eval(*args: str | Path) -> CompletedProcess[str]:
    command = [sys.executable, "-m", "ragpulse.cli", "eval", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_record_gets_one_output_line_with_the_documented_keys(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, BAD), "--output", out)
    assert done.returncode == 0, done.stderr
    results = _results(out)
    assert [r["id"] for r in results] == ["good", "bad"]
    for result in results:
        assert set(result) == {
            "id",
            "status",
            "scores",
            "labels",
            "explanations",
            "slices",
            "abstained",
            "answerable",
            "diagnosis",
            "diagnosis_reason",
            "claims",
            "judge",
            "error_type",
            "error",
        }
        assert set(result["scores"]) == set(METRICS)
        for claim in result["claims"]:
            assert set(claim) == {"text", "answer_start", "answer_end", "verdict", "evidence"}
    good_claim = results[0]["claims"][0]
    assert good_claim["verdict"] == "SUPPORTED"
    evidence = good_claim["evidence"]
    assert set(evidence) == {"context_index", "start", "end", "text"}
    assert CONTEXT[evidence["start"] : evidence["end"]] == evidence["text"]
    assert results[0]["scores"]["groundedness"] == 1.0
    assert results[1]["scores"]["groundedness"] == 0.0
    assert results[0]["judge"] == "lexical"


def test_correctness_is_null_without_a_reference_and_scored_with_one(tmp_path: Path) -> None:
    with_reference = {
        **GOOD,
        "id": "ref",
        "reference": "It was completed in 1889, the Eiffel Tower.",
    }
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, with_reference), "--output", out)
    assert done.returncode == 0, done.stderr
    no_ref, ref = _results(out)
    assert no_ref["scores"]["correctness"] is None
    assert ref["scores"]["correctness"] == 1.0


def test_a_bad_line_gets_an_invalid_input_row_so_outputs_align_with_inputs(
    tmp_path: Path,
) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, "{not json", {"id": "x", "answer": "a"}, BAD)
    out = tmp_path / "out.jsonl"
    done = _eval(source, "--output", out)
    assert done.returncode == 3, done.stderr
    rows = _results(out)
    assert [r["id"] for r in rows] == ["good", "2", "x", "bad"]
    for row in rows[1:3]:
        assert row["status"] == "error" and row["error_type"] == "invalid_input"
        assert row["scores"] == dict.fromkeys(METRICS)
    assert "line 2" in rows[1]["error"] and "contexts" in rows[2]["error"]
    assert "line 2" in done.stderr
    assert "line 3" in done.stderr


def test_context_is_accepted_as_an_alias_of_contexts(tmp_path: Path) -> None:
    record = {"id": "alias", "context": [CONTEXT], "answer": GOOD["answer"]}
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", record), "--output", out)
    assert done.returncode == 0, done.stderr
    assert _results(out)[0]["scores"]["groundedness"] == 1.0


def test_results_go_to_stdout_and_the_summary_to_stderr(tmp_path: Path) -> None:
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, BAD))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in lines] == ["good", "bad"]
    assert "mean" in done.stderr and "p10" in done.stderr
    assert "groundedness" in done.stderr


def test_only_the_asked_metrics_are_scored(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD), "--metrics", "groundedness", "--output", out)
    assert done.returncode == 0, done.stderr
    scores = _results(out)[0]["scores"]
    assert scores == {**dict.fromkeys(METRICS), "groundedness": 1.0}


def test_an_empty_answer_is_reported_as_no_claims(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", {**GOOD, "answer": ""}), "--output", out)
    assert done.returncode == 0, done.stderr
    result = _results(out)[0]
    assert result["status"] == "no_claims"
    assert result["scores"]["groundedness"] is None


def test_fail_under_exits_1_when_a_mean_is_below_the_gate(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, BAD)  # groundedness mean 0.5
    failed = _eval(source, "--output", tmp_path / "o.jsonl", "--fail-under", "groundedness=0.8")
    assert failed.returncode == 1
    assert "groundedness" in failed.stderr


def test_fail_under_exits_0_when_every_mean_meets_its_gate(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, BAD)
    passed = _eval(
        source,
        "--output",
        tmp_path / "o.jsonl",
        "--fail-under",
        "groundedness=0.4",
        "--fail-under",
        "faithfulness=0.5",
    )
    assert passed.returncode == 0, passed.stderr


def test_correctness_mode_chooses_how_detail_beyond_the_reference_scores(
    tmp_path: Path,
) -> None:
    detailed = {
        **GOOD,
        "answer": "The Eiffel Tower was completed in 1889. It is 330 metres tall.",
        "reference": "The Eiffel Tower was completed in 1889.",
    }
    source = _write(tmp_path / "in.jsonl", detailed)
    scores = {}
    for mode in ("agreement", "f1"):
        out = tmp_path / f"{mode}.jsonl"
        done = _eval(source, "--output", out, "--correctness-mode", mode)
        assert done.returncode == 0, done.stderr
        scores[mode] = _results(out)[0]["scores"]["correctness"]
    assert scores == {"agreement": 1.0, "f1": 2 / 3}
    refused = _eval(source, "--correctness-mode", "accuracy")
    assert refused.returncode == 2
    assert "accuracy" in refused.stderr


def test_an_unknown_metric_is_a_usage_error(tmp_path: Path) -> None:
    done = _eval(_write(tmp_path / "in.jsonl", GOOD), "--metrics", "fluency")
    assert done.returncode == 2
    assert "fluency" in done.stderr


def test_a_missing_input_file_is_a_usage_error(tmp_path: Path) -> None:
    done = _eval(tmp_path / "absent.jsonl")
    assert done.returncode == 2
    assert "absent.jsonl" in done.stderr


# --- exit codes: failed evaluations are not success ---------------------------------------

API_KEY = "azure0f3c9b7e2d4a6c8e0f1a3b5c7d9e1f2a"


def _eval_env(*args: str | Path, stdin: str | None = None, **env: str) -> CompletedProcess[str]:
    command = [sys.executable, "-m", "ragpulse.cli", *map(str, args)]
    environment = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    environment.update(env)
    return subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
    )


def test_every_record_refused_with_401_exits_3_without_the_key_in_any_output(
    tmp_path: Path,
) -> None:
    message = f"Incorrect API key provided: {API_KEY}"
    with ChatServer(responder=lambda _body: Reply.failure(401, message)) as server:
        out = tmp_path / "out.jsonl"
        done = _eval_env(
            "eval",
            _write(tmp_path / "in.jsonl", GOOD, BAD),
            "--judge",
            "openai",
            "--model",
            "judge",
            "--base-url",
            server.url,
            "--api-key",
            API_KEY,
            "--output",
            out,
        )
    assert done.returncode == 3, done.stderr
    rows = _results(out)
    assert [r["error_type"] for r in rows] == ["auth_error", "auth_error"]
    assert "Incorrect API key provided: [redacted secret]" in rows[0]["error"]
    assert API_KEY not in out.read_text() + done.stdout + done.stderr
    assert "2 of 2 records failed" in done.stderr


def test_a_rate_limited_llm_judge_is_retried_after_its_retry_after_and_the_record_scored(
    tmp_path: Path,
) -> None:
    with ChatServer(mode="echo-judge") as server:
        server.script(Reply.rate_limited(retry_after=0.2))
        out = tmp_path / "out.jsonl"
        done = _eval_env(
            "eval",
            _write(tmp_path / "in.jsonl", GOOD),
            "--judge",
            "openai",
            "--model",
            "judge",
            "--base-url",
            server.url,
            "--output",
            out,
        )
        calls = len(server.chat_requests)
    assert done.returncode == 0, done.stderr
    (row,) = _results(out)
    assert (row["status"], row["error_type"]) == ("ok", None)
    assert row["scores"]["groundedness"] == 1.0
    assert calls >= 2  # the 429, then the retry that answered


def test_every_record_failing_on_a_refused_connection_exits_3(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval_env(
        "eval",
        _write(tmp_path / "in.jsonl", GOOD),
        "--judge",
        "openai",
        "--model",
        "judge",
        "--base-url",
        f"http://127.0.0.1:{free_port()}/v1",
        "--output",
        out,
    )
    assert done.returncode == 3, done.stderr
    assert _results(out)[0]["error_type"] == "connection_error"


def test_max_errors_tolerates_failures_by_count_or_fraction(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, "{broken", BAD, GOOD)
    out = tmp_path / "o.jsonl"
    assert _eval(source, "--output", out).returncode == 3
    assert _eval(source, "--output", out, "--max-errors", "1").returncode == 0
    assert _eval(source, "--output", out, "--max-errors", "25%").returncode == 0
    assert _eval(source, "--output", out, "--max-errors", "0.2").returncode == 3


def test_failed_records_outrank_a_failed_gate(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", BAD, "{broken")
    done = _eval(source, "--output", tmp_path / "o.jsonl", "--fail-under", "groundedness=0.9")
    assert done.returncode == 3


# --- hostile input: a row and a clear message, never a traceback ---------------------------


def test_a_200k_deep_line_is_an_invalid_input_row_between_good_rows(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, "[" * 200_000, BAD)
    out = tmp_path / "out.jsonl"
    done = _eval(source, "--output", out)
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    rows = _results(out)
    assert [r["id"] for r in rows] == ["good", "2", "bad"]
    assert rows[1]["error_type"] == "invalid_input"
    assert "nested too deeply" in rows[1]["error"]


def test_a_lone_surrogate_escape_is_an_invalid_input_row(tmp_path: Path) -> None:
    lone = '{"id": "s", "contexts": ["x"], "answer": "broken \\ud800 text"}'
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, lone), "--output", out)
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    rows = _results(out)
    assert [r["id"] for r in rows] == ["good", "s"]
    assert "unpaired surrogate" in rows[1]["error"]


def test_a_line_over_the_byte_bound_is_skipped_without_reading_it_whole(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    with source.open("wb") as f:
        f.write(json.dumps(GOOD).encode() + b"\n")
        f.write(b'{"id": "huge", "contexts": ["x"], "answer": "')
        chunk = b"a" * (1 << 20)
        for _ in range(DEFAULT_MAX_LINE_BYTES // len(chunk) + 1):
            f.write(chunk)
        f.write(b'"}\n' + json.dumps(BAD).encode() + b"\n")
    out = tmp_path / "out.jsonl"
    done = _eval(source, "--output", out)
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    rows = _results(out)
    assert [r["id"] for r in rows] == ["good", "2", "bad"]
    assert f"longer than {DEFAULT_MAX_LINE_BYTES} bytes" in rows[1]["error"]


def test_stdout_to_a_full_device_exits_2_with_one_clear_line(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, BAD)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ragpulse.cli", "eval", str(source)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "cannot write results to stdout: No space left on device" in done.stderr


def test_results_written_before_an_unwritable_point_stay_written(tmp_path: Path) -> None:
    # Each row is flushed as it is written, so a consumer sees rows as they come.
    source = _write(tmp_path / "in.jsonl", GOOD, "[" * 200_000, BAD)
    done = _eval_env("eval", "-", stdin=source.read_text())
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == ["good", "2", "bad"]


# --- the command line itself ---------------------------------------------------------------


def test_dash_reads_records_from_stdin(tmp_path: Path) -> None:
    done = _eval_env("eval", "-", stdin=json.dumps(GOOD) + "\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == "good"


def test_version_prints_the_package_version() -> None:
    done = _eval_env("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ragpulse {__version__}"


def test_gate_values_outside_zero_to_one_are_usage_errors(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD)
    for gate in ("groundedness=1.5", "groundedness=-0.1", "groundedness=nan"):
        done = _eval(source, "--fail-under", gate)
        assert done.returncode == 2, gate
        assert "[0, 1]" in done.stderr


def test_help_shows_defaults_an_example_and_the_exit_codes() -> None:
    done = _eval_env("eval", "--help")
    assert done.returncode == 0
    assert "(default: 4)" in done.stdout  # --concurrency
    assert "(default: 0)" in done.stdout  # --max-errors
    assert "example:" in done.stdout and "ragpulse eval answers.jsonl" in done.stdout
    for code in ("0  every record", "1  a --fail-under", "2  usage error", "3  more records"):
        assert code in done.stdout
    assert "exit codes:" in _eval_env("--help").stdout


def test_error_messages_keep_a_long_path_on_one_line(tmp_path: Path) -> None:
    missing = tmp_path / ("very-long-directory-name-" * 4) / "answers-that-do-not-exist.jsonl"
    done = _eval_env("eval", missing, COLUMNS="40")
    assert done.returncode == 2
    assert str(missing) in done.stderr.replace("\r", "")


# --- redacted output -----------------------------------------------------------------------

SSN = "078-05-1120"
PRIVATE = {
    "id": "private",
    "question": "What is Ann's number?",
    "contexts": [f"Ann Lee's social security number is {SSN}."],
    "answer": f"Ann Lee's social security number is {SSN}. She lives in Paris.",
    "reference": f"Her number is {SSN}.",
}


def test_no_content_writes_lengths_and_offsets_but_no_text(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", PRIVATE), "--no-content", "--output", out)
    assert done.returncode == 0, done.stderr
    assert SSN not in out.read_text() + done.stderr
    (row,) = _results(out)
    first = row["claims"][0]
    assert first["text"] == "[withheld: 48 chars]"
    assert (first["answer_start"], first["answer_end"]) == (0, 48)
    assert first["evidence"]["text"].startswith("[withheld: ")
    assert row["scores"]["groundedness"] == 0.5


def test_redact_pattern_replaces_matches_in_every_written_text(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(
        _write(tmp_path / "in.jsonl", PRIVATE),
        "--redact-pattern",
        r"\d{3}-\d{2}-\d{4}",
        "--output",
        out,
    )
    assert done.returncode == 0, done.stderr
    assert SSN not in out.read_text()
    (row,) = _results(out)
    assert row["claims"][0]["text"] == "Ann Lee's social security number is [REDACTED]."


def test_an_invalid_redact_pattern_is_a_usage_error(tmp_path: Path) -> None:
    done = _eval(_write(tmp_path / "in.jsonl", GOOD), "--redact-pattern", "(")
    assert done.returncode == 2
    assert "--redact-pattern" in done.stderr


# --- the whole vector --------------------------------------------------------------------


def test_eval_reads_a_rubric_and_writes_the_vector_with_citations(tmp_path: Path) -> None:
    from tests.cases import worked_example

    record = {
        "id": "leaflet",
        "question": worked_example.QUESTION,
        "contexts": [c.text for c in worked_example.CONTEXTS],
        "answer": worked_example.ANSWER,
        "reference": worked_example.REFERENCE,
        "rubric": list(worked_example.RUBRIC),
    }
    out = tmp_path / "out.jsonl"
    metrics = ",".join(METRICS)
    done = _eval(_write(tmp_path / "in.jsonl", record), "--metrics", metrics, "--output", out)
    assert done.returncode == 0, done.stderr
    (result,) = _results(out)
    scores = result["scores"]
    assert scores["relevancy"] == 1.0
    assert abs(scores["completeness"] - 2 / 3) < 1e-9
    assert scores["citation"] == 0.75
    assert result["abstained"] is False
    assert [c["cited"] for c in result["claims"]] == [[0], [0], [1], [1]]
    assert [c["citation_holds"] for c in result["claims"]] == [True, True, False, True]
    # The summary lists each metric on its own row; nothing combines them.
    assert "relevancy" in done.stderr and "completeness" in done.stderr
    assert "overall" not in done.stderr.lower() and "average" not in done.stderr.lower()


def test_eval_writes_an_unwarranted_abstention_as_abstained_with_groundedness_zero(
    tmp_path: Path,
) -> None:
    record = {**GOOD, "answer": "I don't know."}
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", record), "--output", out)
    assert done.returncode == 0, done.stderr
    (result,) = _results(out)
    assert result["abstained"] is True
    assert result["answerable"] is True
    assert result["scores"]["groundedness"] == 0.0


def test_eval_strict_counts_inferred_claims_as_unfaithful(tmp_path: Path) -> None:
    record = {
        "id": "hours",
        "question": "How long is the store open?",
        "contexts": ["The store opens at 9am and closes at 5pm."],
        "answer": "The store opens at 9am. The store closes in the afternoon.",
    }
    lenient, strict = tmp_path / "lenient.jsonl", tmp_path / "strict.jsonl"
    source = _write(tmp_path / "in.jsonl", record)
    assert _eval(source, "--output", lenient).returncode == 0
    assert _eval(source, "--strict", "--output", strict).returncode == 0
    (before,), (after,) = _results(lenient), _results(strict)
    inferred = sum(1 for c in before["claims"] if c["verdict"] == "INFERRED")
    total = len(before["claims"])
    assert inferred == 1
    assert after["scores"]["faithfulness"] == before["scores"]["faithfulness"] - inferred / total


def _agent_messages(answer: str, result: str) -> list[dict[str, Any]]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "search_docs", "arguments": "{}"},
    }
    return [
        {"role": "user", "content": "When was the tower completed?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
        {"role": "assistant", "content": answer},
    ]


def test_eval_reads_agent_messages_and_writes_skips_and_errors_per_record(tmp_path: Path) -> None:
    calculator = [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4."},
    ]
    source = _write(
        tmp_path / "agent.jsonl",
        {
            "id": "grounded",
            "conversation_id": "c1",
            "messages": _agent_messages("The tower was completed in 1889.", CONTEXT),
        },
        {
            "id": "invented",
            "conversation_id": "c1",
            "messages": _agent_messages("The tower was completed in 1925 by monks.", CONTEXT),
        },
        {"id": "failed", "messages": _agent_messages("It was completed in 1889.", "")},
        {"id": "calc", "messages": calculator},
        {"id": "broken", "messages": [{"role": "user", "content": {"x": 1}}], "answer": "a"},
    )
    out = tmp_path / "out.jsonl"
    done = _eval(source, "--output", out, "--max-errors", "1")
    assert done.returncode == 0, done.stderr
    rows = {row["id"]: row for row in _results(out)}
    assert rows["grounded"]["scores"]["groundedness"] == 1.0
    assert rows["invented"]["scores"]["groundedness"] < 0.5
    assert rows["grounded"]["conversation_id"] == rows["invented"]["conversation_id"] == "c1"
    assert rows["failed"]["status"] in ("ok", "no_claims")
    assert (rows["calc"]["status"], rows["calc"]["error_type"]) == ("skipped", "no_evidence")
    assert rows["broken"]["error_type"] == "invalid_input"
    assert "messages[0].content" in rows["broken"]["error"]
