"""The GitHub Action (action.yml) and `tracekit diff --format github`.

The action is run the way the runner runs a composite action: every `run:` step as
`bash --noprofile --norc -eo pipefail FILE` with a runner's environment, `${{ }}` expressions
of `env:` and `outputs:` substituted, a fresh $GITHUB_OUTPUT per step parsed under the
runner's rules, and $GITHUB_STEP_SUMMARY in a temporary file. Numbers are checked against
the scenario's own truth (fixtures.step_truth) and against `tracekit diff --format json`.
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import KERNELS, Scenario, build_scenario
from fixtures.step_truth import step_truth
from tracekit.cli import app
from tracekit.reports import diff_github as gh
from tracekit.reports.diff_text import signed_ns

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
WORKFLOW = ROOT / "examples" / "workflows" / "perf-gate.yml"
SHAPE = {"steps": 16, "layers": 2}
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def schema(name: str) -> jsonschema.Draft7Validator:
    """check-jsonschema's vendored SchemaStore schema ``name`` (no network)."""
    text = (
        importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
        .joinpath(f"{name}.json")
        .read_text()
    )
    return jsonschema.Draft7Validator(json.loads(text))


# -- the runner's rules for $GITHUB_OUTPUT (actions/runner FileCommandManager) ---------------


def parse_output_file(text: str) -> dict[str, str]:
    """``name=value`` lines and ``name<<DELIM`` … ``DELIM`` blocks; empty lines skipped; any
    other line, or a block without its delimiter, is an error as on the runner."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            name, value = line.split("=", 1)
            if not name:
                raise ValueError(f"Invalid format '{line}'")
            out[name] = value
        elif heredoc >= 0:
            name, delimiter = line.split("<<", 1)
            if not name or not delimiter:
                raise ValueError(f"Invalid format '{line}'")
            value_lines = []
            while True:
                if i >= len(lines):
                    raise ValueError(f"Matching delimiter not found '{delimiter}'")
                i += 1
                if lines[i - 1] == delimiter:
                    break
                value_lines.append(lines[i - 1])
            out[name] = "\n".join(value_lines)
        else:
            raise ValueError(f"Invalid format '{line}'")
    return out


def test_output_parser_bites_and_round_trips() -> None:
    with pytest.raises(ValueError, match="Invalid format"):
        parse_output_file("verdict=ok\nnot an output\n")
    with pytest.raises(ValueError, match="Matching delimiter not found"):
        parse_output_file("md<<EOF\nline\n")
    values = {"a": "x=y<<z", "b": "", "md": "line 1\n\nk=v\nEOF\n", "c": "+3.2%"}
    text = gh.output_file_text(values)
    assert text.startswith("a=x=y<<z\nb=\nmd<<ghadelimiter_")
    assert parse_output_file(text) == values
    with pytest.raises(ValueError, match="delimiter"):
        gh.output_file_text({"x": "a\nDELIM\n"}, delimiter=lambda: "DELIM")


# -- emulating the composite run ---------------------------------------------------------------


def _resolve(text: str, context: dict[str, Any]) -> str:
    """``${{ inputs.x }}``, ``${{ github.action_path }}``, ``${{ github.workspace }}`` and
    ``${{ steps.ID.outputs.NAME }}``; any other expression fails the test."""

    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        if m := re.fullmatch(r"inputs\.([\w-]+)", expr):
            return context["inputs"][m.group(1)]
        if m := re.fullmatch(r"github\.(action_path|workspace)", expr):
            return context["github"][m.group(1)]
        if m := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr):
            return context["steps"].get(m.group(1), {}).get(m.group(2), "")
        raise AssertionError(f"the emulator does not know ${{{{ {expr} }}}}")

    return EXPR.sub(one, text)


def run_action(workspace: Path, tmp: Path, **given: str) -> dict[str, Any]:
    """The composite action run as the runner runs it; its exit status, outputs, job summary
    and log (stdout of every step)."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs.update({"install": "false", **given})
    assert all(inputs[n] for n, s in ACTION["inputs"].items() if s.get("required")), inputs
    runner_temp = tmp / "runner_temp"
    runner_temp.mkdir(exist_ok=True)
    context: dict[str, Any] = {
        "inputs": inputs,
        "github": {"action_path": str(ROOT), "workspace": str(workspace)},
        "steps": {},
    }
    base_env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "RUNNER_OS": "Linux",
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_ACTION_PATH": str(ROOT),
    }
    summary, log, status = [], [], 0
    for i, step in enumerate(ACTION["runs"]["steps"]):
        assert "if" not in step and step["shell"] == "bash"
        assert "${{" not in step["run"], "an expression inside run: is code injection"
        files = {
            k: runner_temp / f"{k.lower()}_{i}" for k in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")
        }
        for f in files.values():
            f.write_text("")
        script = runner_temp / f"step_{i}.sh"
        script.write_text(step["run"])
        env = {k: _resolve(str(v), context) for k, v in step.get("env", {}).items()}
        env = {**base_env, **env, **{k: str(v) for k, v in files.items()}}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "Traceback" not in done.stderr, done.stderr
        log.append(done.stdout)
        summary.append(files["GITHUB_STEP_SUMMARY"].read_text())
        if "id" in step:  # the runner processes the files of a failed step too
            context["steps"][step["id"]] = parse_output_file(files["GITHUB_OUTPUT"].read_text())
        if done.returncode:
            status = done.returncode
            break
    outputs = {k: _resolve(v["value"], context) for k, v in ACTION["outputs"].items()}
    return {"status": status, "outputs": outputs, "summary": "".join(summary), "log": "".join(log)}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Scenario, Scenario]:
    """A workspace with base.sqlite, head.sqlite (GEMM 20 % slower) and their scenarios."""
    root = tmp_path_factory.mktemp("workspace")
    base, head = build_scenario(**SHAPE), build_scenario(**SHAPE, gemm_scale=1.2)
    (root / "traces").mkdir()
    write_nsys_sqlite(base.events, root / "traces" / "base.sqlite")
    write_nsys_sqlite(head.events, root / "traces" / "head.sqlite")
    return root, base, head


def _json_diff(base: Path, head: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["diff", str(base), str(head), "--format", "json"])
    return json.loads(result.stdout)


def _truth_median(sc: Scenario) -> float:
    return statistics.median(row["dur"] for row in step_truth(sc))


def _truth_mean(sc: Scenario, column: str) -> float:
    return statistics.fmean(row[column] for row in step_truth(sc))


def test_action_metadata_is_valid_and_the_validator_bites() -> None:
    validator = schema("github-actions")
    assert list(validator.iter_errors(ACTION)) == []
    assert ACTION["runs"]["using"] == "composite"
    # the same action without `shell:` on its run steps is rejected
    broken = copy.deepcopy(ACTION)
    for step in broken["runs"]["steps"]:
        del step["shell"]
    errors = list(validator.iter_errors(broken))
    assert len(errors) == 1 and list(errors[0].absolute_path) == ["runs"]
    # inputs: strings with string defaults; outputs: one per gate output of the same name
    assert set(ACTION["inputs"]) == {
        "base", "head", "threshold", "min-impact", "args", "fail-on-regression", "install",
        "python",
    }  # fmt: skip
    assert all(isinstance(s.get("default", ""), str) for s in ACTION["inputs"].values())
    assert {k: v["value"] for k, v in ACTION["outputs"].items()} == {
        k: f"${{{{ steps.gate.outputs.{k} }}}}"
        for k in ("verdict", "median-change", "median-change-ns", "exit-code", "markdown")
    }
    # every input reaches the scripts through env:, none through an expression in run:
    used = {
        m.group(1)
        for step in ACTION["runs"]["steps"]
        for value in step.get("env", {}).values()
        for m in re.finditer(r"inputs\.([\w-]+)", str(value))
    }
    assert used == set(ACTION["inputs"])


def test_example_workflow_is_valid_and_uses_the_action() -> None:
    validator = schema("github-workflows")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    workflow["on"] = workflow.pop(True)  # PyYAML reads the key `on` as YAML 1.1's true
    assert list(validator.iter_errors(workflow)) == []
    broken = copy.deepcopy(workflow)
    del broken["jobs"]["gate"]["runs-on"]
    assert list(validator.iter_errors(broken))
    step = next(s for s in workflow["jobs"]["gate"]["steps"] if s.get("uses") == "./")
    assert set(step["with"]) <= set(ACTION["inputs"])
    assert {"base", "head"} <= set(step["with"])
    assert re.search(r"uses: <owner>/tracekit@v1", WORKFLOW.read_text())


def test_action_fails_a_regression_with_summary_and_outputs(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path
) -> None:
    root, base_sc, head_sc = workspace
    ran = run_action(root, tmp_path, base="traces/base.sqlite", head="traces/head.sqlite")
    assert ran["status"] == 1
    data = _json_diff(root / "traces" / "base.sqlite", root / "traces" / "head.sqlite")
    step = data["step"]["estimate"]
    # ground truth: the step median of each scenario, and the GEMM time per step
    want_ns = _truth_median(head_sc) - _truth_median(base_sc)
    assert step["delta"] == pytest.approx(want_ns, abs=1)
    want_rel = want_ns / _truth_median(base_sc)
    gemm_ns = _truth_mean(head_sc, "cat_gemm_ns") - _truth_mean(base_sc, "cat_gemm_ns")
    out = ran["outputs"]
    assert out["verdict"] == "regression" and out["exit-code"] == "1"
    assert out["median-change"] == f"{100 * want_rel:+.1f}%" == "+4.4%"
    assert out["median-change-ns"] == f"{want_ns:.0f}" == "32312"
    # the job summary: the Markdown verdict naming gemm and its change per step
    summary = ran["summary"]
    assert summary.startswith("### tracekit diff\n\n🔴 **Regression**: <code>gemm</code> time")
    assert f"time per step +20.0% ({signed_ns(gemm_ns)}, CI " in summary
    assert "| **gemm** (category) |" in summary
    assert out["markdown"] == summary  # small enough: the same text
    # annotations: one error (gemm), no warning, the verdict notice
    lines = ran["log"].splitlines()
    errors = [line for line in lines if line.startswith("::error")]
    assert len(errors) == 1
    assert errors[0].startswith("::error title=tracekit%3A gemm per step regressed::gemm time ")
    assert not any(line.startswith("::warning") for line in lines)
    notices = [line for line in lines if line.startswith("::notice")]
    assert len(notices) == 1 and "(+4.4%25, CI " in notices[0]


def test_action_passes_a_clean_pair_and_installs_with_the_given_python(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path
) -> None:
    root = workspace[0]
    calls = tmp_path / "python_calls"
    fake = tmp_path / "py"
    fake.write_text(
        f'#!/bin/bash\necho "$@" >> {calls}\n'
        f'if [ "$1 $2" = "-m pip" ]; then exit 0; fi\nexec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)
    ran = run_action(
        root,
        tmp_path,
        base="traces/base.sqlite",
        head="traces/base.sqlite",
        install="true",
        python=str(fake),
    )
    assert ran["status"] == 0
    assert calls.read_text().splitlines() == [
        f"-m pip install --disable-pip-version-check --quiet {ROOT}",
        "-c import tracekit",
        "-m tracekit.cli.github_gate",
    ]
    assert ran["outputs"] == {
        "verdict": "no-change",
        "median-change": "0.0%",
        "median-change-ns": "0",
        "exit-code": "0",
        "markdown": ran["summary"],
    }
    assert ran["summary"].startswith("### tracekit diff\n\n⚪ **No significant change**: ")
    lines = ran["log"].splitlines()
    assert [line.split("::")[1].split()[0] for line in lines] == ["notice"]


def test_regression_passes_when_fail_on_regression_is_false(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path
) -> None:
    ran = run_action(
        workspace[0],
        tmp_path,
        base="traces/base.sqlite",
        head="traces/head.sqlite",
        **{"fail-on-regression": "false"},
    )
    assert ran["status"] == 0
    assert ran["outputs"]["verdict"] == "regression" and ran["outputs"]["exit-code"] == "1"


def test_hostile_args_through_the_action_are_one_error_line(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path
) -> None:
    root = workspace[0]
    args = '--step-marker "$(touch pwned1)" ; touch pwned2 `touch pwned3` --bogus'
    ran = run_action(
        root, tmp_path, base="traces/base.sqlite", head="traces/head.sqlite", args=args
    )
    assert ran["status"] == 2
    assert not list(root.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))
    assert ran["log"].count("\n") == 1
    assert ran["log"].startswith("::error title=tracekit gate::input args: ")
    assert ran["outputs"]["verdict"] == "inconclusive" and ran["outputs"]["exit-code"] == "2"
    assert ran["summary"].startswith("### tracekit diff\n\n⚠️ **Inconclusive**: input args")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"TRACEKIT_HEAD": "traces/missing.sqlite"}, "no such file, folder or pattern"),
        ({"TRACEKIT_HEAD": "traces/*.nsys-rep"}, "matches no file"),
        ({"TRACEKIT_HEAD": ""}, "input head is empty"),
        ({"TRACEKIT_ARGS": '--step-marker "unclosed'}, "No closing quotation"),
        ({"TRACEKIT_ARGS": "--format json"}, "--format is not allowed"),
        ({"TRACEKIT_ARGS": "--threshold=50%"}, "--threshold is not allowed"),
        ({"TRACEKIT_ARGS": "--top many"}, "Invalid value for '--top'"),
        ({"TRACEKIT_THRESHOLD": "5"}, "--threshold '5'"),
        ({"TRACEKIT_FAIL_ON_REGRESSION": "maybe"}, "give true or false"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path, env: dict, needle: str
) -> None:
    root = workspace[0]
    output = tmp_path / "output"
    environ = {
        "PATH": os.environ["PATH"],
        "GITHUB_WORKSPACE": str(root),
        "GITHUB_OUTPUT": str(output),
        "TRACEKIT_BASE": "traces/base.sqlite",
        "TRACEKIT_HEAD": "traces/head.sqlite",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tracekit.cli.github_gate"],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("::error title=tracekit gate::")
    assert needle in done.stdout
    assert parse_output_file(output.read_text())["verdict"] == "inconclusive"


def test_python_without_tracekit_is_an_error_not_a_regression(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path
) -> None:
    fake = tmp_path / "py"
    fake.write_text("#!/bin/bash\nexit 1\n")
    fake.chmod(0o755)
    ran = run_action(
        workspace[0], tmp_path, base="traces/base.sqlite", head="traces/head.sqlite",
        python=str(fake),
    )  # fmt: skip
    assert ran["status"] == 2 and ran["log"].startswith("::error title=tracekit gate::")
    assert ran["outputs"]["verdict"] == "inconclusive"


# -- tracekit diff --format github --------------------------------------------------------------


def test_escaping_follows_the_toolkit() -> None:
    assert gh.escape_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"
    assert gh.escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"
    assert (
        gh.command("warning", "50% x\ny", title="t: a,b")
        == "::warning title=t%3A a%2Cb::50%25 x%0Ay"
    )
    assert gh.clean("a\x1b[31mb\x07c\nd") == "a\ufffd[31mb\ufffdc\nd"


def test_diff_format_github_escapes_a_hostile_kernel_name(
    workspace: tuple[Path, Scenario, Scenario], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, base_sc, head_sc = workspace
    evil = "evil%kern,a:b\x1b[31m::error::pwned"
    lm_head = KERNELS["lm_head"].name
    paths = [
        write_nsys_sqlite(
            sc.events.with_columns(pl.col("name").replace({lm_head: evil})),
            tmp_path / f"{side}.sqlite",
        )
        for side, sc in (("base", base_sc), ("head", head_sc))
    ]
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = CliRunner().invoke(app, ["diff", *map(str, paths), "--format", "github"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert all(line.startswith(("::error ", "::notice ")) for line in lines), lines
    assert "\x1b" not in result.stdout
    # the kernel is its own category (other) and regressed by 20 %: its error names it escaped
    other = next(line for line in lines if line.startswith("::error title=tracekit%3A other "))
    assert other.endswith("most of it: evil%25kern,a:b\ufffd[31m::error::pwned +20.52 µs")
    assert "(+4.4%25, CI " in lines[-1] and lines[-1].startswith("::notice title=tracekit diff%3A")
    # the summary holds the Markdown verdict, the name escaped for Markdown
    text = summary.read_text()
    assert text.startswith("### tracekit diff\n\n🔴 **Regression**") and "\x1b" not in text


def _with_gates(data: dict[str, Any], n: int, warnings: int) -> dict[str, Any]:
    """``data`` with ``n`` regressed categories (delta 1..n µs, a hostile name each) and
    ``warnings`` warnings."""
    data = copy.deepcopy(data)
    template = data["categories"][0]
    data["categories"] = [
        {
            **copy.deepcopy(template),
            "name": f"cat{i}: a,b%\nc",
            "status": "regression",
            "estimate": {**template["estimate"], "delta": 1000.0 * i},
        }
        for i in range(1, n + 1)
    ]
    data["warnings"] = [f"warning {i}" for i in range(warnings)]
    return data


def test_at_most_ten_annotations_of_a_type_worst_first(
    workspace: tuple[Path, Scenario, Scenario],
) -> None:
    root = workspace[0]
    data = _json_diff(root / "traces" / "base.sqlite", root / "traces" / "head.sqlite")
    lines = gh.annotations(_with_gates(data, 13, 12))
    kinds = [line.split(" ", 1)[0] for line in lines]
    assert kinds.count("::error") == 10 and kinds.count("::warning") == 10
    assert kinds.count("::notice") == 2
    errors = [line for line in lines if line.startswith("::error")]
    # worst first: 13, 12, … 4 µs; the title escaped as a property, the message as data
    assert [int(re.search(r"title=tracekit%3A cat(\d+)", e).group(1)) for e in errors] == list(
        range(13, 3, -1)
    )
    assert errors[0].startswith("::error title=tracekit%3A cat13%3A a%2Cb%25%0Ac per step ")
    assert "::cat13: a,b%25%0Ac time per step " in errors[0]
    assert lines[-1] == (
        "::notice title=tracekit diff%3A more::3 more regressions (cat3: a,b%25%0Ac per step "
        "regressed; cat2: a,b%25%0Ac per step regressed; cat1: a,b%25%0Ac per step regressed); "
        "2 more warnings (tracekit diff; tracekit diff)"
    )
    # ten of each: nothing folded
    assert len(gh.annotations(_with_gates(data, 10, 10))) == 21


def test_summary_is_cut_below_the_limit_with_a_note(
    workspace: tuple[Path, Scenario, Scenario],
) -> None:
    root = workspace[0]
    data = _json_diff(root / "traces" / "base.sqlite", root / "traces" / "head.sqlite")
    full = gh.summary(data)
    size = len(full.encode())
    assert size > 2000 and full.endswith("</sub>\n")
    cut = gh.summary(data, limit=1500)
    assert len(cut.encode()) <= 1500
    assert cut.startswith("### tracekit diff\n\n🔴 **Regression**: <code>gemm</code> time")
    kept, note = cut.split("\n> ⚠️ ")
    how = "`tracekit diff --format md` prints the whole verdict"
    assert note == f"Cut at 1,500 of {size:,} bytes: {how}.\n"
    assert full.startswith(kept) and kept.endswith("\n")
