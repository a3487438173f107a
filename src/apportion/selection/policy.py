"""Apply a policy stack to the allocation candidates and roll the dice.

Pure: failure counts, the clock and the seed are inputs. The flow, after the
provider-selection seed:

1. check the policy (base module first, limits, expressions) — ``Rejected`` with
   the JSON path of every problem;
2. drop excluded accounts (``exclude_accounts``, a retry after a failed launch) and
   disabled ones; ``Infeasible`` if none is left;
3. run the modules in order, recording the probabilities after each (the trace);
4. roll within the most preferred group (dice.py) and annotate every candidate with
   its account, priority group (0 = most preferred), probability and cost.

Candidates of excluded or disabled accounts stay in the list (Placement returned
them) with ``priority_group`` null and probability 0: they cannot be chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError

from apportion.contracts.launch import (
    Account,
    AllocationRequest,
    PriorityGroup,
    Provider,
    Selection,
    TraceStep,
)
from apportion.contracts.policy import (
    BASE_MODULES,
    ExpressionModule,
    FailurePenaltyModule,
    PolicyModule,
    WeightsModule,
    user_loc,
)
from apportion.errors import Infeasible, Problem, Rejected, json_path
from apportion.limits import Limits, env_name, over_limit
from apportion.selection import dice, expression, modules
from apportion.selection.annotate import annotate
from apportion.selection.distribution import Distribution, names
from apportion.selection.facts import (
    DEFAULT_ACCOUNT,
    Facts,
    account_costs,
    finite_costs,
    request_costs,
)
from apportion.selection.memo import ExpressionMemo
from apportion.selection.utilisation import free_shares

_POLICY_ADAPTER: TypeAdapter[list[PolicyModule]] = TypeAdapter(list[PolicyModule])


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    """The annotated candidates (same order as given) and the selection."""

    requests: tuple[AllocationRequest, ...]
    selection: Selection


def parse_policy(raw: Sequence[Mapping[str, Any]], path: str = "policy") -> list[PolicyModule]:
    """Validate a policy given as plain data (e.g. config/default_policy.yaml)."""
    try:
        return _POLICY_ADAPTER.validate_python(list(raw))
    except ValidationError as exc:
        problems = policy_problems(exc, path)
        raise Rejected(f"{problems[0].path}: {problems[0].message}", problems) from None


def policy_problems(exc: ValidationError, path: str = "policy") -> list[Problem]:
    """Problems of a policy's ValidationError with the paths a user expects."""
    return [
        Problem(json_path([path, *user_loc(err["loc"], err["type"])]), err["msg"])
        for err in exc.errors(include_url=False, include_input=False)
    ]


def failure_window_hours(policy: Sequence[PolicyModule]) -> float | None:
    """How far back the failure-history store must count (None: no failure_penalty).

    A job has one failure count per account, so with several ``failure_penalty``
    modules the widest window is read.
    """
    windows = [m.window_hours for m in policy if isinstance(m, FailurePenaltyModule)]
    return max(windows) if windows else None


def check_policy(policy: Sequence[PolicyModule], limits: Limits) -> None:
    """Raise :class:`Rejected` listing every problem of the stack itself."""
    problems: list[Problem] = []
    if not policy:
        raise Rejected.at(
            "policy",
            "an empty policy has no base distribution: start with `equal` or "
            "`least_used` (or send null for candidates only)",
        )
    if len(policy) > limits.max_policy_modules:
        raise over_limit(
            "max_policy_modules",
            Problem(
                "policy",
                f"{len(policy)} modules exceed the limit of {limits.max_policy_modules} "
                f"(raise {env_name('max_policy_modules')})",
            ),
        )
    if policy[0].module not in BASE_MODULES:
        problems.append(
            Problem(
                "policy[0].module",
                f"a policy starts with a base distribution, `equal` or `least_used`, "
                f"not `{policy[0].module}`",
            )
        )
    for i, module in enumerate(policy[1:], start=1):
        if module.module in BASE_MODULES:
            problems.append(
                Problem(
                    f"policy[{i}].module",
                    f"`{module.module}` is a base distribution and may only come first",
                )
            )
    too_long = [
        problem
        for i, module in enumerate(policy)
        if isinstance(module, ExpressionModule)
        for problem in expression.check(module, f"policy[{i}]", limits)
    ]
    if problems:  # a stack invalid besides its expressions' lengths is invalid first
        raise Rejected.of(problems + too_long)
    if too_long:
        raise over_limit("yaql_max_expression_length", too_long)


def _check_inputs(
    accounts: Mapping[str, Account],
    failures: Mapping[str, int],
    exclude_accounts: Collection[str],
    limits: Limits,
) -> None:
    for path, size in (
        ("accounts", len(accounts)),
        ("failures", len(failures)),
        ("exclude_accounts", len(exclude_accounts)),
    ):
        if size > limits.max_accounts:
            raise over_limit(
                "max_accounts",
                Problem(
                    path,
                    f"{size} entries exceed the limit of {limits.max_accounts} "
                    f"(raise {env_name('max_accounts')})",
                ),
            )
    bad = [
        Problem(f"failures.{a}", "a failure count must be ≥ 0")
        for a, n in failures.items()
        if n < 0
    ]
    if bad:
        raise Rejected(f"{bad[0].path}: {bad[0].message}", bad)


@dataclass(frozen=True, slots=True)
class Pool:
    """What selection needs to know about the candidates, without the candidates.

    The candidates engine fills it from its own compact representation, so the
    policy runs before any ``AllocationRequest`` is built (each is then built once,
    with its selection fields); :func:`apply_policy` fills it from built requests.
    """

    # The account of each candidate (the account of its anchoring tree's root).
    accounts: Sequence[str | None]
    # Given each account's cost_per_hour, each candidate's: that plus Σ amount × unit
    # price, added in allocation order, not clamped (see facts.request_costs).
    costs: Callable[[Mapping[str, float]], Sequence[float]]
    # The resource classes the candidates allocate (read by least_used, expression).
    resource_classes: Callable[[], Sequence[str]]
    # The job's providers by uuid (read by least_used and expression only).
    providers: Callable[[], Mapping[str, Provider]]


@dataclass(frozen=True, slots=True)
class Choice:
    """The policy's answer about a :class:`Pool`."""

    # account → (its priority group, or None when excluded/disabled; the probability
    # of each of its candidates within that group)
    per_account: dict[str, tuple[int | None, float]]
    costs: list[float]  # cost_per_hour of each candidate, in pool order
    selection: Selection


def apply_policy(
    requests: Sequence[AllocationRequest],
    providers: Mapping[str, Provider],
    accounts: Mapping[str, Account],
    policy: Sequence[PolicyModule],
    *,
    failures: Mapping[str, int],
    exclude_accounts: Collection[str],
    seed: int | None,
    now: datetime,
    limits: Limits,
) -> PolicyOutcome:
    """Turn candidates into priority groups and probabilities, and roll the dice.

    Every request must carry ``account`` (the candidates engine sets it: the account
    of the candidate's tree root). Accounts missing from ``accounts`` get the
    defaults (priority 0, weight 1, cost 0, enabled). Returns annotated copies of
    ``requests``; the engine itself uses :func:`choose` and builds each once.
    """
    pool = Pool(
        accounts=[request["account"] for request in requests],
        costs=lambda base: request_costs(requests, providers, base),
        resource_classes=lambda: _resource_classes(requests),
        providers=lambda: providers,
    )
    choice = choose(
        pool,
        accounts,
        policy,
        failures=failures,
        exclude_accounts=exclude_accounts,
        seed=seed,
        now=now,
        limits=limits,
    )
    return PolicyOutcome(annotate(requests, choice.per_account, choice.costs), choice.selection)


def choose(
    pool: Pool,
    accounts: Mapping[str, Account],
    policy: Sequence[PolicyModule],
    *,
    failures: Mapping[str, int],
    exclude_accounts: Collection[str],
    seed: int | None,
    now: datetime,
    limits: Limits,
    expression_memo: ExpressionMemo | None = None,
) -> Choice:
    """:func:`apply_policy` over a :class:`Pool`: groups, probabilities, costs, the dice.

    ``expression_memo`` lets a caller that re-runs policies over the same accounts
    reuse ``expression`` modules' results (selection/memo.py); the answer is the same.
    """
    check_policy(policy, limits)
    _check_inputs(accounts, failures, exclude_accounts, limits)
    accounts_of = _candidate_accounts(pool)
    present = Counter(accounts_of)
    if len(present) > limits.max_accounts:
        raise over_limit(
            "max_accounts",
            Problem(
                "providers",
                f"the candidates span {len(present)} accounts, over the limit of "
                f"{limits.max_accounts} (raise {env_name('max_accounts')})",
            ),
        )
    settings = {a: accounts.get(a, DEFAULT_ACCOUNT) for a in present}
    excluded_set = set(exclude_accounts)
    excluded = sorted(a for a in present if a in excluded_set)
    disabled = sorted(a for a in present if a not in excluded_set and not settings[a].enabled)
    eligible = tuple(sorted(a for a in present if a not in excluded_set and settings[a].enabled))
    if not eligible:
        raise Infeasible(
            "every account with an allocation candidate is excluded or disabled"
            + (f" (excluded: {names(excluded)})" if excluded else "")
            + (f" (disabled: {names(disabled)})" if disabled else "")
            + "; enable an account or retry without excluding it"
        )
    costs = finite_costs(pool.costs({a: s.cost_per_hour for a, s in settings.items()}))
    kinds = {m.module for m in policy}
    facts = Facts.build(
        eligible,
        settings,
        failures,
        account_costs(accounts_of, costs) if kinds & {"cost", "expression"} else {},
        present,
        free_shares(pool.providers(), eligible, pool.resource_classes())
        if kinds & {"least_used", "expression"}
        else None,
        now,
        limits,
        expression_memo,
    )
    trace = _run_stack(policy, facts, removed_note=_removed_note(excluded, disabled))
    return _roll(accounts_of, present, trace, costs, seed)


def _candidate_accounts(pool: Pool) -> Sequence[str]:
    if not pool.accounts:
        raise Infeasible("there is no allocation candidate to choose from")
    if None in pool.accounts:
        # A caller bug, not a user's: the candidates engine always sets it.
        raise ValueError(f"allocation request {list(pool.accounts).index(None)} carries no account")
    return cast(Sequence[str], pool.accounts)


def _roll(
    accounts_of: Sequence[str],
    present: Counter[str],
    trace: list[TraceStep],
    costs: list[float],
    seed: int | None,
) -> Choice:
    """Roll within the most preferred group; each account's group and probability."""
    groups = trace[-1]["groups"]  # the final distribution's, computed for the trace
    rng = dice.new_rng(seed)
    winner, roll = dice.roll_account(rng, groups[0])
    chosen = dice.pick_candidate(rng, _positions(accounts_of, winner))
    per_account: dict[str, tuple[int | None, float]] = dict.fromkeys(present, (None, 0.0))
    for g, members in enumerate(groups):
        for account, p in members.items():
            per_account[account] = (g, p / present[account])
    ranked: list[PriorityGroup] = [
        {"priority": g, "probabilities": m} for g, m in enumerate(groups)
    ]
    selection: Selection = {
        "chosen": chosen,
        "account": winner,
        "roll": roll,
        "groups": ranked,
        "trace": trace,
    }
    return Choice(per_account, costs, selection)


def _positions(items: Sequence[str], wanted: str) -> list[int]:
    """Every index of ``wanted`` in ``items``, ascending (C-level scans with ``index``)."""
    out: list[int] = []
    at = -1
    try:
        while True:
            at = items.index(wanted, at + 1)
            out.append(at)
    except ValueError:
        return out


def _trace_step(module: str, dist: Distribution, note: str | None) -> TraceStep:
    """The trace entry of one module."""
    probabilities, groups = dist.trace_maps()
    return {"module": module, "probabilities": probabilities, "groups": groups, "note": note}


def _run_stack(
    policy: Sequence[PolicyModule], facts: Facts, *, removed_note: str | None
) -> list[TraceStep]:
    """Every module in order, each through its entry in the modules table."""
    first = policy[0]
    assert first.module in BASE_MODULES  # check_policy guarantees it
    weights_later = any(isinstance(m, WeightsModule) for m in policy[1:])
    given = getattr(first, "weighted", None)
    weighted = given if given is not None else not weights_later
    step = modules.BASES[first.module](first, facts, weighted)
    note = f"{step.note}; {removed_note}" if removed_note else step.note
    trace = [_trace_step(first.module, step.dist, note)]
    dist = step.dist
    for i, module in enumerate(policy[1:], start=1):
        step = modules.ADJUSTMENTS[module.module](module, dist, facts, f"policy[{i}]")
        dist = step.dist
        trace.append(_trace_step(module.module, dist, step.note))
    return trace


def _removed_note(excluded: Sequence[str], disabled: Sequence[str]) -> str | None:
    parts = []
    if excluded:
        parts.append(f"excluded: {names(excluded)}")
    if disabled:
        parts.append(f"disabled: {names(disabled)}")
    return "; ".join(parts) or None


def _resource_classes(requests: Sequence[AllocationRequest]) -> list[str]:
    """The resource classes the candidates allocate (sorted: a stable order)."""
    seen: set[str] = set()
    for request in requests:
        for alloc in request["allocations"].values():
            seen.update(alloc["resources"])
    return sorted(seen)
