"""Replay counter series through a rules file with real Prometheus tooling, minute by minute.

``replay`` writes the series as OpenMetrics, backfills them into a TSDB
(``promtool tsdb create-blocks-from openmetrics``), starts ``prometheus`` on 127.0.0.1 over
it, and queries every alert's expression over the whole span with ``query_range`` at the
rules' step, each recording rule it reads written out in place (with the reference's label
matchers added to the raw series it selects: every recording rule here keeps the labels it
is matched on), which is what Prometheus would have recorded at each step. ``for:`` is applied
here as Prometheus applies it: an alert fires at a step once its expression has held at every
step of the ``for`` duration before it. Prometheus never evaluates alerting rules on the past;
this is the same expression on the same data.

Every process it starts is stopped by its PID.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.servers.prometheus import _spawn, free_port, wait_until  # noqa: E402

STEP = 60
"""Seconds between samples and between rule evaluations."""
_MAX_POINTS = 10_000
"""query_range answers at most 11,000 points a series; ask in chunks below it."""
_RECORDED = re.compile(r"[a-z_]+:[a-z_]+:[a-z0-9_]+")

Series = tuple[str, tuple[tuple[str, str], ...]]
"""A series: its name and its sorted labels."""


@dataclass(frozen=True)
class Firing:
    """When one alert fired during a replay: its severity and each step it fired at."""

    alert: str
    severity: str
    steps: tuple[int, ...]
    """Seconds since the start of the replay, one per step the alert was firing."""


def write_openmetrics(path: Path, start: int, values: Mapping[Series, Sequence[float]]) -> None:
    """Each series' cumulative values, one sample a ``STEP`` from ``start`` (Unix seconds)."""
    by_family: dict[str, list[Series]] = {}
    for series in values:
        by_family.setdefault(series[0], []).append(series)
    with path.open("w", encoding="utf-8") as out:
        for family, members in sorted(by_family.items()):
            out.write(f"# TYPE {family} unknown\n")
            for name, labels in members:
                text = ",".join(f'{k}="{v}"' for k, v in labels)
                for index, value in enumerate(values[(name, labels)]):
                    out.write(f"{name}{{{text}}} {value:.10g} {start + index * STEP}\n")
        out.write("# EOF\n")


def _alerts_and_their_records(document: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict]:
    """The alerting rules and the recording rules they read (directly or through others)."""
    records = {r["record"]: r for g in document["groups"] for r in g["rules"] if "record" in r}
    alerts = [r for g in document["groups"] for r in g["rules"] if "alert" in r]
    needed: dict[str, dict[str, Any]] = {}
    pending = [name for a in alerts for name in _RECORDED.findall(str(a["expr"]))]
    while pending:
        name = pending.pop()
        if name in records and name not in needed:
            needed[name] = records[name]
            pending += _RECORDED.findall(str(records[name]["expr"]))
    return alerts, needed


_RAW = re.compile(
    r"\b(ragpulse_evaluation_labels_total|gen_ai_evaluation_score_(?:count|sum)"
    r"|ragpulse_evaluator_evaluations_total)(\{[^}]*\})?"
)
_REFERENCE = re.compile(r"\b([a-z_]+:[a-z_]+:[a-z0-9_]+)(\{[^}]*\})?")


def inline(expr: str, records: Mapping[str, Mapping[str, Any]]) -> str:
    """``expr`` with each recording rule it reads replaced by that rule's expression."""

    def replace(match: re.Match[str]) -> str:
        name, matchers = match.group(1), (match.group(2) or "{}")[1:-1]
        if name not in records:
            return match.group(0)
        inner = inline(str(records[name]["expr"]), records)
        if matchers:

            def add(raw: re.Match[str]) -> str:
                own = (raw.group(2) or "{}")[1:-1]
                return f"{raw.group(1)}{{{','.join(m for m in (own, matchers) if m)}}}"

            inner = _RAW.sub(add, inner)
        return f"({inner})"

    return _REFERENCE.sub(replace, expr)


def _get(url: str, timeout: float = 600.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


class _Prometheus:
    """``prometheus`` over a TSDB directory, with no scraping and no rules."""

    def __init__(self, workdir: Path, data: Path) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed (Debian: apt-get install prometheus)")
        config = workdir / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\n", encoding="utf-8")
        self.url = f"http://127.0.0.1:{free_port()}"
        self._server = _spawn(
            "prometheus",
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
                "--storage.tsdb.retention.time=100y",
                "--query.max-samples=200000000",
                "--query.timeout=10m",
            ],
            workdir,
        )
        self._server.wait_ready(f"{self.url}/-/ready")

    def query_range(self, expr: str, start: int, end: int) -> dict[Series, set[int]]:
        """The steps (Unix seconds) at which ``expr`` had a result, per series."""
        found: dict[Series, set[int]] = {}
        chunk = _MAX_POINTS * STEP
        for first in range(start, end + 1, chunk):
            last = min(end, first + chunk - STEP)
            query = urllib.parse.urlencode(
                {"query": expr, "start": first, "end": last, "step": STEP}
            )
            body = _get(f"{self.url}/api/v1/query_range?{query}")
            if body.get("status") != "success":
                raise RuntimeError(f"query_range {expr!r} failed: {body}")
            for result in body["data"]["result"]:
                key: Series = ("", tuple(sorted(result["metric"].items())))
                found.setdefault(key, set()).update(int(t) for t, _ in result["values"])
        return found

    def stop(self) -> None:
        self._server.stop()


def _firing_steps(active: set[int], hold: int) -> set[int]:
    """The steps an alert fires at: those whose expression held for ``hold`` seconds."""
    firing = set()
    for step in active:
        if all(step - back in active for back in range(STEP, hold + 1, STEP)):
            firing.add(step)
    return firing


def _seconds(duration: str) -> int:
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[duration[-1]]


def replay(
    rules: Path, values: Mapping[Series, Sequence[float]], start: int, workdir: Path
) -> list[Firing]:
    """Each alert of ``rules`` that fired over ``values`` (cumulative, one a ``STEP`` from
    ``start``), with the steps it fired at."""
    promtool = shutil.which("promtool")
    if promtool is None:
        raise RuntimeError("promtool is not installed (Debian: apt-get install prometheus)")
    steps = max(len(v) for v in values.values())
    end = start + (steps - 1) * STEP
    document = yaml.safe_load(rules.read_text(encoding="utf-8"))
    alerts, records = _alerts_and_their_records(document)
    data = workdir / "data"
    source = workdir / "series.om.txt"
    write_openmetrics(source, start, values)
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(source), str(data)],
        check=True,
        capture_output=True,
    )
    source.unlink()
    server = _Prometheus(workdir, data)
    try:
        wait_until(
            lambda: _get(f"{server.url}/api/v1/status/tsdb").get("status") == "success",
            timeout=60,
            what="the TSDB",
        )
        fired = []
        for alert in alerts:
            hold = _seconds(str(alert.get("for", "0s")))
            active = server.query_range(inline(str(alert["expr"]), records), start, end)
            steps_fired: set[int] = set()
            for series_steps in active.values():
                steps_fired |= _firing_steps(series_steps, hold)
            if steps_fired:
                fired.append(
                    Firing(
                        alert["alert"],
                        str(alert.get("labels", {}).get("severity", "")),
                        tuple(sorted(s - start for s in steps_fired)),
                    )
                )
        return fired
    finally:
        server.stop()


def episodes(steps: Iterable[int]) -> list[int]:
    """The first step of each run of consecutive firing steps."""
    starts: list[int] = []
    previous = None
    for step in sorted(steps):
        if previous is None or step - previous > STEP:
            starts.append(step)
        previous = step
    return starts
