"""`apportion explain`: the kind as `solve` takes it or as --kind, and a picture asked for
without matplotlib answered with how to install it in this checkout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from apportion.cli import main
from tests.conftest import EXAMPLES

JOB = str(EXAMPLES / "launch_select.json")


@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "launch_select", JOB],
        ["explain", JOB, "--kind", "launch_select"],
        ["explain", "--kind", "launch_select", JOB],
        ["explain", "launch_select", JOB, "--kind", "launch_select"],
    ],
)
def test_explain_solves_a_job_whose_kind_comes_first_as_in_solve_or_as_kind(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    assert "chosen: candidate 2 on vsphere-b" in capsys.readouterr().out


def test_explain_refuses_two_different_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "partition", JOB, "--kind", "launch_select"]) == 2
    assert capsys.readouterr().err == (
        "apportion explain: two kinds given: partition and --kind launch_select; give one\n"
    )


def test_explain_of_a_job_without_a_kind_says_how_to_give_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", JOB]) == 2
    assert capsys.readouterr().err == (
        "apportion explain: FILE is not a result envelope; give its kind to solve it as a "
        "job: explain KIND FILE\n"
    )


def test_a_picture_without_matplotlib_says_how_to_install_the_plot_extra_in_the_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    out = tmp_path / "chart.png"

    assert main(["explain", "launch_select", JOB, "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        "apportion explain: pictures need matplotlib, the plot extra: in the checkout run "
        "`scripts/bootstrap plot` (installed from a package: pip install 'apportion[plot]')\n"
    )
    assert not out.exists()


def test_explain_of_a_heal_answer_shows_each_consumer_and_the_picks_of_the_one_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", str(EXAMPLES / "heal_org.envelope.json")]) == 0
    out = capsys.readouterr().out

    assert "[1] server-2: invalid → valid, attach {'rhel-2s': 4}" in out
    assert "[4] guest-b: invalid → invalid, attach {}" in out
    # server-3 is in the job's `explain` list: why it got the single pool.
    assert "pick 1: pool:rhel-unlimited-sockets — only candidate" in out
    assert out.count("pick ") == 1
