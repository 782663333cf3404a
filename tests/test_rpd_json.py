"""rocmProfileData ``rpd2tracing.py`` Chrome-trace JSON: the public sample in its old and
current formats against the ``.rpd`` it came from, the fixture writer (checked line for line
against the real output), its variants, and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from fixtures.rpd_json_writer import write_rpd2tracing
from fixtures.rpd_writer import write_rpd
from fixtures.scenario import build_scenario
from tests.conftest import one_line, sha256
from tracekit import load
from tracekit.errors import TraceError
from tracekit.parsers import kineto, registry
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.rpd import RPD_JSON
from tracekit.parsers.rocprof.rpd.json_rows import us_text_to_ns
from tracekit.timeline import Timeline

DATA = Path(__file__).parent / "data" / "real" / "amd_rpd"
RPD = DATA / "matmul_result.rpd"
HEAD_JSON = DATA / "matmul_result.head.json"  # rpd2tracing since Nov 2024
OLD_JSON = DATA / "matmul_result.json"  # rpd2tracing before Jul 2024
COLUMNS = ["ts", "dur", "kind", "name", "device", "stream", "pid", "tid"]


def _rows(tl: Timeline) -> pl.DataFrame:
    return tl.df.with_columns(
        pl.col("kind", "name").cast(pl.String), ts=pl.col("ts") + tl.meta["clock"]["zero_ns"]
    )


def _without_frames(rows: pl.DataFrame) -> pl.DataFrame:
    """The JSON's rows less the synthetic GPU frames rpd2tracing adds on the device."""
    return rows.filter(~((pl.col("kind") == "range") & (pl.col("device") >= 0)))


def _same_links(a: pl.DataFrame, b: pl.DataFrame, on: list[str]) -> bool:
    """The two timelines group device rows and their calls alike (ids may differ)."""
    joined = a.join(b, on=on, suffix="_b")
    pairs = joined.select("corr", "corr_b").unique()
    return (
        joined.height == a.height
        and pairs.height == pairs["corr"].n_unique() == pairs["corr_b"].n_unique()
    )


def test_current_format_equals_the_rpd() -> None:
    before = sha256(HEAD_JSON)
    assert [p.name for p in registry() if p.sniff(Probe(HEAD_JSON))] == ["rpd-json"]
    assert not kineto.sniff(Probe(HEAD_JSON))
    tl, ref = load(HEAD_JSON), load(RPD)
    assert tl.validate() == [] and tl.meta["warnings"] == []
    assert tl.meta["format"] == "rpd2tracing-json"
    assert (
        tl.meta["clock"]
        == ref.meta["clock"]
        == {"domain": "CLOCK_MONOTONIC", "zero_ns": 8_306_017_478_773_569}
    )
    assert [(d["index"], d["vendor"]) for d in tl.meta["devices"]] == [(2, "AMD")]
    a, b = _rows(ref), _rows(tl)
    assert b.select(COLUMNS).sort(COLUMNS).equals(a.select(COLUMNS).sort(COLUMNS))
    assert dict(b.group_by("kind").agg(pl.len()).rows()) == {
        "api": 120, "kernel": 29, "memcpy": 55, "memset": 1, "range": 5}  # fmt: skip
    device = ["ts", "name", "device", "stream"]
    assert _same_links(a.filter(pl.col("device") >= 0), b.filter(pl.col("device") >= 0), device)
    host = ["ts", "name", "tid"]
    linked = b.filter(pl.col("kind") == "api", pl.col("corr").is_not_null())
    assert linked.height == 85  # every call that launched an op (one op each here)
    assert _same_links(linked, a.filter(pl.col("kind") == "api"), host)
    assert sha256(HEAD_JSON) == before


def test_old_format_whole_microseconds() -> None:
    assert [p.name for p in registry() if p.sniff(Probe(OLD_JSON))] == ["rpd-json"]
    tl, ref = load(OLD_JSON), load(RPD)
    assert tl.meta["warnings"] == [
        "times are whole µs (rpd2tracing before Nov 2024): ns digits are lost"
    ]
    a = _rows(ref).with_columns(ts=pl.col("ts") // 1000 * 1000, dur=pl.col("dur") // 1000 * 1000)
    b = _rows(tl)
    assert b.select(COLUMNS).sort(COLUMNS).equals(a.select(COLUMNS).sort(COLUMNS))
    on = ["ts", "name", "device", "stream"]
    assert _same_links(a.filter(pl.col("device") >= 0), b.filter(pl.col("device") >= 0), on)


def test_writer_repeats_the_real_output_line_for_line(tmp_path: Path) -> None:
    """Counter lines aside (rpd2tracing's queue-depth walk), the writer's output of the real
    ``.rpd`` is the tool's output, in both formats."""
    for real, layout, fractional in ((HEAD_JSON, "object", True), (OLD_JSON, "array", False)):
        mine = write_rpd2tracing(RPD, tmp_path / "out.json", layout=layout, fractional=fractional)

        def events(path: Path) -> list[str]:
            return [ln for ln in path.read_text().splitlines() if '"ph":"C"' not in ln]

        assert events(mine) == events(real)


@pytest.mark.parametrize(("layout", "fractional"), [("object", True), ("array", False)])
@pytest.mark.parametrize("version", ["2", "3"])
def test_fixture_json_equals_its_rpd(
    layout: str, fractional: bool, version: str, tmp_path: Path
) -> None:
    events = build_scenario(steps=3, layers=2, exposed_all_to_all=True).events
    rpd = write_rpd(events, tmp_path / "t.rpd", version=version, session=1)
    path = write_rpd2tracing(rpd, tmp_path / "t.json", layout=layout, fractional=fractional)
    assert [p.name for p in registry() if p.sniff(Probe(path))] == ["rpd-json"]
    tl, ref = load(path), load(rpd)
    assert tl.validate() == []
    a, b = _rows(ref), _rows(tl)
    if not fractional:
        a = a.with_columns(ts=pl.col("ts") // 1000 * 1000, dur=pl.col("dur") // 1000 * 1000)
    assert _without_frames(b).select(COLUMNS).sort(COLUMNS).equals(a.select(COLUMNS).sort(COLUMNS))
    on = ["ts", "name", "device", "stream"]
    ops = b.filter(pl.col("device") >= 0, pl.col("kind") != "range")
    assert ops["corr"].null_count() == 0
    assert _same_links(a.filter(pl.col("device") >= 0), ops, on)
    steps = events.filter(pl.col("kind") == "range")["name"].unique().sort().to_list()
    frames = b.filter(pl.col("kind") == "range", pl.col("device") >= 0)
    assert frames["name"].unique().sort().to_list() == steps  # GPU frames of each roctx range
    assert frames["args"].str.contains("UserMarker frame").all()


def test_gzip_and_reserialised_json(tmp_path: Path) -> None:
    """Gzip, and a file re-written by a JSON library (numbers stay strings, spacing changes)."""
    ref = load(HEAD_JSON).df
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(HEAD_JSON.read_bytes()))
    assert [p.name for p in registry() if p.sniff(Probe(gz))] == ["rpd-json"]
    assert load(gz).df.equals(ref)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(HEAD_JSON.read_text()), indent=1))
    assert [p.name for p in registry() if p.sniff(Probe(pretty))] == ["rpd-json"]
    assert load(pretty).df.equals(ref)


def test_microsecond_text_to_ns() -> None:
    texts = ["8306017670485.923", "8306020566602.7993", "154889", "0.001", "1e-05", "12.9995",
             None, "x"]  # fmt: skip
    got = pl.DataFrame({"t": texts}).select(us_text_to_ns("t")).to_series().to_list()
    assert got == [8306017670485923, 8306020566602799, 154889000, 1, 0, 13000, None, None]


# -- bad input -------------------------------------------------------------------------------


def test_unescaped_name_skips_that_line(tmp_path: Path) -> None:
    lines = HEAD_JSON.read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if '"name":"hipLaunchKernel"' in ln)
    lines[k] = lines[k].replace("hipLaunchKernel", 'hip"Launch\\Kernel')  # as the tool writes
    path = tmp_path / "t.json"
    path.write_text("\n".join(lines) + "\n")
    tl = load(path)
    assert tl.meta["warnings"] == [
        "1 lines that are not valid JSON (unescaped names?) skipped",
        "1 api_op flow ends match no call or op; those links are lost",  # that call's flow
    ]
    assert len(tl) == len(load(HEAD_JSON)) - 1


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    data = HEAD_JSON.read_bytes()
    for cut in (len(data) // 2, data.index(b"\n,", len(data) // 3) + 1, 300):
        path.write_bytes(data[:cut])  # mid-line, after a whole line, in the metadata
        assert RPD_JSON.sniff(Probe(path))
        with pytest.raises(TraceError) as exc:
            load(path)
        one_line(exc, "t.json", "truncated")


def test_json_without_rows(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [ {}\n,{"name": "process_name", "ph": "M", "pid":"2",'
        '"args":{"name":"GPU2"}}\n]\n} \n'
    )
    assert RPD_JSON.sniff(Probe(path))
    with pytest.raises(TraceError) as exc:
        load(path)
    one_line(exc, "holds no GPU ops, API calls or ranges")


def test_kineto_and_rocprof_json_are_not_claimed() -> None:
    from tests.conftest import real_files

    for param in real_files("amd", "kineto_*/*.json*", "rocprof_v1_*/results.json"):
        path = param.values[0]
        if path is None:
            pytest.skip("TRACEKIT_REAL_TRACES not set")
        assert not RPD_JSON.sniff(Probe(path)), path
