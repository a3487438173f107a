"""Limits on everything a user controls.

Every size a job can choose (payload, pools, providers, disks, spaces, candidates,
yaql expressions) has a ceiling here, so a hostile or mistaken job is ``rejected``
with the limit it broke instead of exhausting a worker. The defaults are
generous for real deployments; operators override them with ``APPORTION_LIMITS__*``
environment variables (see ``config/settings.py``).
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from apportion.errors import Problem, Rejected


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Whole job, as JSON text.
    max_payload_bytes: int = Field(32 * 1024 * 1024, gt=0)
    # auto_attach / guest_host_attach
    max_pools: int = Field(50_000, gt=0)
    max_products: int = Field(10_000, gt=0)
    max_entitlements: int = Field(50_000, gt=0)
    # heal_org: consumers per job (each also within the attach limits above).
    max_heal_consumers: int = Field(20_000, gt=0)
    # heal_org: wall time the loop over consumers may take; the answer then holds the
    # consumers healed so far and where it stopped. Keep it below the attach queue's
    # soft time limit (60 s by default), which would answer the job rejected/time_limit
    # with nothing healed: the rest of the limit reads the job and writes the answer.
    heal_seconds: float = Field(45.0, gt=0)
    # launch_select
    max_providers: int = Field(100_000, gt=0)
    max_request_length: int = Field(16_384, gt=0)
    max_request_groups: int = Field(64, gt=0)
    max_candidates: int = Field(10_000, gt=0)
    max_accounts: int = Field(10_000, gt=0)
    max_policy_modules: int = Field(32, gt=0)
    # partition
    max_disks: int = Field(256, gt=0)
    max_spaces: int = Field(1_024, gt=0)
    max_lp_variables: int = Field(200_000, gt=0)
    # yaql (partition schemas and the selection `expression` module)
    yaql_max_expression_length: int = Field(4_096, gt=0)
    yaql_max_iterations: int = Field(10_000, gt=0)
    yaql_memory_quota: int = Field(100_000, gt=0)
    yaql_timeout_seconds: float = Field(1.0, gt=0)
    # Strings anywhere in a job (ids, names, attribute values).
    max_string_length: int = Field(65_536, gt=0)
    # Nesting of objects and arrays anywhere in a job (no real job goes past ~8).
    max_json_depth: int = Field(64, gt=0)
    # Values (array items and object members, counted over the whole job): bounds what
    # a worker's main process decodes before a job reaches a pool child. The largest
    # real jobs (tens of thousands of providers or pools) hold a few million.
    max_json_items: int = Field(5_000_000, gt=0)
    # A result envelope as JSON: it is stored in Redis for a day, twice (result stream
    # and result backend) up to 64 KiB, once past that (workers/results/publisher.py).
    # launch_select stops adding candidates before it is reached (the result says so);
    # any other kind over it is answered rejected/result_too_large.
    max_envelope_bytes: int = Field(8 * 1024 * 1024, gt=1024)
    # launch_outcome: how far ahead of the worker's clock an event's `at` may be (clock
    # skew between hosts); a later one would count in every failure window until then.
    max_event_skew_seconds: int = Field(300, ge=0)
    # yaql: address space the evaluating child may add on top of the worker's (MiB).
    yaql_max_memory_mib: int = Field(256, gt=0)
    # partition: largest size (disk, min/max/size) a job may state, in MiB (1 EiB).
    partition_max_size_mib: int = Field(2**40, gt=0)
    # partition: wall time one MILP solve (whole-MiB step) may take.
    partition_solver_seconds: float = Field(10.0, gt=0)
    # launch_select: provider choices the candidate search may try before it stops
    # (guards against requests whose constraints prune only at the last group).
    max_candidate_search_steps: int = Field(2_000_000, gt=0)
    # launch_select `expression` module: wall time per account on top of
    # yaql_timeout_seconds (yaql spends ~0.1-0.3 ms per attribute access, so a fixed
    # 1 s cannot cover a thousand accounts; a bomb is still stopped in bounded time).
    yaql_seconds_per_account: float = Field(0.002, ge=0)
    # launch_select: wall time all `expression` modules of one job share, however many
    # accounts and modules it has (each module also stays within the limit above).
    yaql_job_seconds: float = Field(5.0, gt=0)


DEFAULT_LIMITS = Limits()

# The `rejected` code of a job over each limit, as docs/contract.md's Error codes table
# defines them: too_large for a size of the job (a count, a length, a stated size),
# limit_exceeded for the attach engines' counts, too_complex for what the partition LP
# grows to (its variables are disks × spaces: no one size of the job is over a limit,
# the product of two is), bad_expression for every bound on a yaql expression. None:
# the limit cuts the answer short instead of refusing the job (the answer says so).
LIMIT_CODES: Final[dict[str, str | None]] = {
    "max_payload_bytes": "too_large",
    "max_pools": "limit_exceeded",
    "max_products": "limit_exceeded",
    "max_entitlements": "limit_exceeded",
    "max_heal_consumers": "limit_exceeded",
    "heal_seconds": None,  # the consumers healed so far are answered (summary.stopped_at)
    "max_providers": "too_large",
    "max_request_length": "too_large",
    "max_request_groups": "too_large",
    "max_candidates": None,  # `capped`: the first max_candidates are answered
    "max_accounts": "too_large",
    "max_policy_modules": "too_large",
    "max_disks": "too_large",
    "max_spaces": "too_large",
    "max_lp_variables": "too_complex",
    "yaql_max_expression_length": "bad_expression",
    "yaql_max_iterations": "bad_expression",
    "yaql_memory_quota": "bad_expression",
    "yaql_timeout_seconds": "bad_expression",
    "max_string_length": "too_large",
    "max_json_depth": "too_deep",
    "max_json_items": "too_large",
    # launch_select drops candidates and heal_org consumers to stay under it; any other
    # kind's answer over it is replaced by the worker (workers/results) with
    # rejected/result_too_large.
    "max_envelope_bytes": "result_too_large",
    "max_event_skew_seconds": "in_the_future",
    "yaql_max_memory_mib": "bad_expression",
    "partition_max_size_mib": "too_large",
    "partition_solver_seconds": "too_complex",
    # `search_exhausted`: the candidates found so far, or infeasible when none was
    "max_candidate_search_steps": None,
    "yaql_seconds_per_account": "bad_expression",
    "yaql_job_seconds": "bad_expression",
}


def over_limit(field: str, problems: list[Problem] | Problem) -> Rejected:
    """The rejection of a job over limit ``field``, with the code the contract gives it.

    Every check of a limit on a job's size raises this, so that the code comes from
    :data:`LIMIT_CODES` alone; the messages name the limit's environment variable.
    """
    code = LIMIT_CODES[field]
    if code is None:
        raise ValueError(f"{field} cuts the answer short; it never refuses a job")
    listed = [problems] if isinstance(problems, Problem) else problems
    return Rejected.of(listed, code=code)


def env_name(field: str) -> str:
    """The environment variable an operator sets to change limit ``field``."""
    return f"APPORTION_LIMITS__{field.upper()}"
