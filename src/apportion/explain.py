"""Pictures and tables of results: ``apportion explain FILE``.

* launch_select — the seed's pie chart: the account probabilities after every policy
  module (one pie per trace step), and a table of the final priority groups.
* partition — the disk layout: a bar per disk, one colour per space, ``unallocated``
  hatched grey; and a table of disks × spaces.
* the other kinds — a short summary on the console (no picture).

The tables need nothing extra; the pictures use matplotlib, the optional ``plot`` extra
(in a checkout: ``.venv/bin/pip install -e '.[plot]'``, or ``scripts/bootstrap dev``),
imported only when a picture is asked for. Output format follows the file name (``.png``
or ``.svg``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from apportion.contracts.partition_checks import UNALLOCATED

# scripts/demo installs no plot extra (a graphics stack: the demo stays quick); the
# picture says how to add it, at the locked versions.
PLOT_MISSING = (
    "pictures need matplotlib, the plot extra: in the checkout run `scripts/bootstrap plot` "
    "(installed from a package: pip install 'apportion[plot]')"
)


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a screen
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(PLOT_MISSING) from exc
    return plt


# ---- launch selection -------------------------------------------------------------


def selection_table(result: Mapping[str, Any]) -> Table:
    selection = result.get("selection") or {}
    table = Table(title="launch selection: probability per account after each module")
    trace: Sequence[Mapping[str, Any]] = selection.get("trace", [])
    accounts = sorted({a for step in trace for a in step["probabilities"]})
    table.add_column("module")
    for account in accounts:
        table.add_column(account, justify="right")
    table.add_column("note")
    for step in trace:
        probs = step["probabilities"]
        table.add_row(
            step["module"],
            *[f"{probs[a]:.1%}" if a in probs else "—" for a in accounts],
            escape(step.get("note") or ""),
        )
    for g, group in enumerate(selection.get("groups", [])):
        probs = group["probabilities"]
        table.add_row(
            f"group {g}",
            *[f"{probs[a]:.1%}" if a in probs else "" for a in accounts],
            "final; the dice roll in the first non-empty group" if g == 0 else "spillover",
        )
    if selection:
        table.caption = (
            f"chosen: candidate {selection['chosen']} on {selection['account']} "
            f"(roll {selection['roll']:.4f})"
        )
    return table


def _step_groups(step: Mapping[str, Any]) -> list[Mapping[str, float]]:
    groups: list[Mapping[str, float]] = step.get("groups") or [step["probabilities"]]
    return groups


def selection_chart(result: Mapping[str, Any], out: Path) -> Path:
    """One column per policy module, one row per priority group: the seed's pie chart."""
    plt = _pyplot()
    selection = result.get("selection")
    if not selection:
        raise ValueError("this result has no selection (a candidates-only job)")
    trace: Sequence[Mapping[str, Any]] = selection["trace"]
    accounts = sorted({a for step in trace for a in step["probabilities"]})
    colours = {a: plt.cm.tab20(i % 20) for i, a in enumerate(accounts)}
    rows = max(len(_step_groups(step)) for step in trace)
    cols = len(trace)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 3.0 * rows + 0.6), squeeze=False)
    for c, step in enumerate(trace):
        groups = _step_groups(step)
        for r in range(rows):
            ax = axes[r][c]
            probs = {a: p for a, p in groups[r].items() if p > 0} if r < len(groups) else {}
            if not probs:
                ax.axis("off")
                continue
            ax.pie(
                list(probs.values()),
                labels=[f"{a}\n{p:.0%}" for a, p in probs.items()],
                colors=[colours[a] for a in probs],
                startangle=90,
                counterclock=False,
                wedgeprops={"linewidth": 1, "edgecolor": "white"},
                textprops={"fontsize": 8},
            )
            title = step["module"] if r == 0 else ""
            if len(groups) > 1:
                title = f"{title}\ngroup {r}".strip()
            ax.set_title(title, fontsize=9)
    fig.suptitle(
        f"selection: {selection['account']} (candidate {selection['chosen']}, "
        f"roll {selection['roll']:.3f}); rows are priority groups, the dice roll in group 0",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


# ---- partition ----------------------------------------------------------------------


def partition_table(result: Mapping[str, Any]) -> Table:
    disks = result["disks"]
    spaces = [s["space_id"] for s in disks[0]["spaces"]] if disks else []
    table = Table(title="disks × spaces (MiB)")
    table.add_column("disk")
    table.add_column("size", justify="right")
    for space in spaces:
        table.add_column(space, justify="right", style="dim" if space == UNALLOCATED else None)
    for disk in disks:
        sizes = {s["space_id"]: s["size"] for s in disk["spaces"]}
        table.add_row(
            disk["disk_id"], str(disk["size"]), *[str(sizes.get(s, 0) or "·") for s in spaces]
        )
    return table


def partition_chart(result: Mapping[str, Any], out: Path) -> Path:
    plt = _pyplot()
    disks = result["disks"]
    spaces = [s["space_id"] for s in disks[0]["spaces"]] if disks else []
    colours = {s: plt.cm.tab20(i % 20) for i, s in enumerate(x for x in spaces if x != UNALLOCATED)}
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(disks) + 1.6))
    for row, disk in enumerate(disks):
        left = 0
        for space in disk["spaces"]:
            size = space["size"]
            if not size:
                continue
            share = size / disk["size"] if disk["size"] else 0
            is_free = space["space_id"] == UNALLOCATED
            ax.barh(
                row,
                share,
                left=left,
                color="#dddddd" if is_free else colours[space["space_id"]],
                hatch="//" if is_free else None,
                edgecolor="white",
            )
            if share > 0.06:
                ax.text(
                    left + share / 2,
                    row,
                    f"{space['space_id']}\n{size}",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
            left += share
    ax.set_yticks(range(len(disks)), [f"{d['disk_id']} ({d['size']} MiB)" for d in disks])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the disk")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="#dddddd", hatch="//"))
    ax.legend(
        handles,
        [*colours, UNALLOCATED],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25),
        ncol=min(6, len(handles)),
        fontsize=8,
    )
    ax.set_title("disk layout")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


# ---- one explain function per kind (apportion.kinds: JobKind.explain) ----------------


def _no_picture(kind: str, out: Path | None) -> None:
    if out is not None:
        raise ValueError(f"explain draws no picture of {kind} results; leave out --out")


def explain_launch_select(
    result: Mapping[str, Any], out: Path | None, console: Console
) -> Path | None:
    if result.get("selection") is None:
        for i, request in enumerate(result["allocation_requests"]):
            alloc = ", ".join(f"{rp}: {a['resources']}" for rp, a in request["allocations"].items())
            console.print(f"  candidate {i}: {escape(alloc)}")
        if out is not None:
            raise ValueError("this result has no selection (a candidates-only job)")
        return None
    console.print(selection_table(result))
    for attempt in result.get("attempts") or []:
        verdict = "launched" if attempt["ok"] else f"failed ({attempt['reason']})"
        console.print(f"  attempt {attempt['attempt']} on {attempt['account']}: {verdict}")
    return selection_chart(result, out) if out else None


def explain_partition(result: Mapping[str, Any], out: Path | None, console: Console) -> Path | None:
    console.print(partition_table(result))
    for vg in result.get("volume_groups", []):
        pvs = ", ".join(f"{pv['disk_id']} {pv['size']}" for pv in vg["physical_volumes"])
        console.print(f"  vg {vg['id']}: physical volumes {pvs or '—'}")
    return partition_chart(result, out) if out else None


def explain_auto_attach(
    result: Mapping[str, Any], out: Path | None, console: Console
) -> Path | None:
    _no_picture("auto_attach", out)
    console.print(f"  attach {result['pool_quantities']}")
    console.print(
        f"  covered {result['covered_products']}, uncovered {result['uncovered_products']}"
    )
    for pick in result["explanation"].get("picks", []):
        console.print(f"  pick {pick['order']}: {pick['group']} — {pick['decided_by']}")
    return None


def explain_heal_org(result: Mapping[str, Any], out: Path | None, console: Console) -> Path | None:
    """One line per consumer (compliance before → after, what it attached), then the
    picks of each consumer the job asked to explain (its ``explain`` list). Lines naming
    consumers are not read as markup: uuids are the caller's text."""
    _no_picture("heal_org", out)
    summary = result["summary"]
    console.print(
        f"  {summary['answered']} of {summary['consumers']} consumers: "
        f"{summary['healed']} healed, {summary['already_compliant']} already compliant, "
        f"{summary['still_not_compliant']} still not compliant, {summary['rejected']} rejected"
    )
    if not summary["complete"]:
        console.print(
            f"  stopped at consumer {summary['stopped_at']} ({summary['stopped_reason']})"
        )
    for answer in result["consumers"]:
        who = f"  [{answer['index']}] {answer['consumer']}"
        if answer["status"] != "ok":
            console.print(f"{who}: rejected — {answer['error']['message']}", markup=False)
            continue
        before = answer["compliance_before"]["status"]
        after = answer["compliance_after"]["status"]
        console.print(
            f"{who}: {before} → {after}, attach {answer['pool_quantities']}", markup=False
        )
        if "explanation" in answer:
            console.print(
                f"      covered {answer['covered_products']}, "
                f"uncovered {answer['uncovered_products']}"
            )
            for pick in answer["explanation"].get("picks", []):
                console.print(f"      pick {pick['order']}: {pick['group']} — {pick['decided_by']}")
    if summary["pools_exhausted"]:
        console.print(f"  pools exhausted: {', '.join(summary['pools_exhausted'])}")
    return None


def explain_guest_host_attach(
    result: Mapping[str, Any], out: Path | None, console: Console
) -> Path | None:
    _no_picture("guest_host_attach", out)
    console.print(f"  host attaches {result['host_pool_quantities']}")
    for pool in result["derived_pools"]:
        quantity = "unlimited" if pool["quantity"] == -1 else pool["quantity"]
        console.print(
            f"  derived pool for the guest: {pool['id']} ({quantity}, provides "
            f"{pool['provided_products']})"
        )
    console.print(f"  guest attaches {result['guest_pool_quantities']}")
    return None


def explain_launch_outcome(
    result: Mapping[str, Any], out: Path | None, console: Console
) -> Path | None:
    _no_picture("launch_outcome", out)
    console.print(f"  {result['account']} {result['outcome']}: recorded={result['recorded']}")
    return None


# ---- entry --------------------------------------------------------------------------


def explain(envelope: Mapping[str, Any], out: Path | None, console: Console) -> Path | None:
    """Print the table for ``envelope``; render the picture to ``out`` when given."""
    from apportion import kinds

    kind, status = envelope.get("kind"), envelope.get("status")
    if status != "ok":
        error = envelope.get("error") or {}
        console.print(f"{kind} job {envelope.get('job_id')}: {status} — {error.get('message')}")
        return None
    spec = kinds.get(str(kind))
    if spec.explain is None:
        raise ValueError(f"the {kind} kind has no explanation")
    written: Path | None = kinds.load(spec.explain)(envelope["result"], out, console)
    return written
