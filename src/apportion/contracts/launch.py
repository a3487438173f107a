"""launch_select job and result.

The job is validated once, by pydantic, when it arrives. Its providers are
TypedDicts rather than models: a cloud sends thousands of them, pydantic validates a
TypedDict into a plain ``dict`` (defaults filled in) several times faster than it
builds model instances, and the engine only reads them.

The result is plain data: the engine builds these TypedDicts as ordinary dicts and
lists, once, and they are serialised as they are. The JSON Schema of the result is
generated from the same definitions (``TypeAdapter(LaunchSelectResult)``), so the
schema and what the engine writes cannot drift apart; keys are declared in the
order the engine writes them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    with_config,
)
from pydantic_core import InitErrorDetails
from typing_extensions import TypedDict  # pydantic's requirement before Python 3.12

from apportion.contracts.base import FiniteFloat, JobBase, WireModel, finite
from apportion.contracts.policy import PolicyModule, PoolName

# As WireModel: unknown keys ignored, no NaN or infinity.
_WIRE = ConfigDict(extra="ignore", allow_inf_nan=False)


@with_config(_WIRE)
class Inventory(TypedDict):
    total: Annotated[int, Field(ge=0)]
    reserved: NotRequired[Annotated[int, Field(default=0, ge=0)]]
    min_unit: NotRequired[Annotated[int, Field(default=1, ge=1)]]
    max_unit: NotRequired[
        Annotated[int | None, Field(default=None, ge=1, description="defaults to total")]
    ]
    step_size: NotRequired[Annotated[int, Field(default=1, ge=1)]]
    # The constraint before the finiteness check, so that the schema shows
    # exclusiveMinimum (pydantic renders a constraint after a validator as "gt").
    allocation_ratio: NotRequired[
        Annotated[float, Field(default=1.0, gt=0), BeforeValidator(finite)]
    ]


@with_config(_WIRE)
class Provider(TypedDict):
    uuid: Annotated[str, Field(min_length=1, max_length=256)]
    name: NotRequired[Annotated[str | None, Field(default=None)]]
    parent_provider_uuid: NotRequired[Annotated[str | None, Field(default=None)]]
    account: NotRequired[
        Annotated[str | None, Field(default=None, description="defaults to the root's account")]
    ]
    inventories: NotRequired[Annotated[dict[str, Inventory], Field(default_factory=dict)]]
    usages: NotRequired[Annotated[dict[str, int], Field(default_factory=dict)]]
    traits: NotRequired[Annotated[list[str], Field(default_factory=list)]]
    aggregates: NotRequired[Annotated[list[str], Field(default_factory=list)]]
    prices: NotRequired[Annotated[dict[str, FiniteFloat] | None, Field(default=None)]]


PROVIDER: TypeAdapter[Provider] = TypeAdapter(Provider)
"""Validates one provider into a plain dict with every key (tests, tools)."""


def _as_models(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate the providers, reporting a non-object as a model would.

    A provider or an inventory that is not an object reads "Input should be a valid
    dictionary or instance of Provider" (or Inventory), as it always has; a TypedDict
    alone would say "Input should be a valid dictionary". Only a failed validation
    pays for the rewording.
    """
    try:
        return handler(value)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if not any(e["type"] == "dict_type" for e in errors):
            raise
        details: list[InitErrorDetails] = []
        for e in errors:
            loc = e["loc"]
            model = {1: "Provider", 3: "Inventory"}.get(len(loc))
            if (
                e["type"] == "dict_type"
                and model
                and (model == "Provider" or loc[1] == "inventories")
            ):
                details.append(
                    {
                        "type": "model_type",
                        "loc": loc,
                        "input": e["input"],
                        "ctx": {"class_name": model},
                    }
                )
            else:
                details.append(
                    {"type": e["type"], "loc": loc, "input": e["input"], "ctx": e.get("ctx", {})}
                )
        raise ValidationError.from_exception_data(exc.title, details) from None


class Account(WireModel):
    priority: FiniteFloat = 0
    weight: FiniteFloat = Field(1.0, ge=0)
    cost_per_hour: FiniteFloat = Field(0.0, ge=0)
    enabled: bool = True


class LaunchSelectJob(JobBase):
    providers: Annotated[list[Provider], WrapValidator(_as_models)]
    request: str = Field(description="a Placement GET /allocation_candidates query string")
    accounts: dict[str, Account] = Field(default_factory=dict)
    # Omitted → the pool's policy from the policy store (else the default's, else the
    # file's); explicit null → candidates only. See apportion.launch for the precedence.
    policy: list[PolicyModule] | None = Field(default=None)
    pool: PoolName | None = Field(
        default=None,
        description="the pool whose policy (in the policy store) decides when the job sends "
        "no `policy`; omitted: the global default",
    )
    failures: dict[str, int] | None = None
    exclude_accounts: list[str] = Field(default_factory=list)
    seed: int | None = None

    @property
    def policy_given(self) -> bool:
        """True when the job carried a ``policy`` key (even ``null``)."""
        return "policy" in self.model_fields_set


# ---- result -------------------------------------------------------------------------
# Fields with a default are NotRequired only so that the schema says what a reader may
# rely on; the engine always writes every key.


class ProviderAllocation(TypedDict):
    resources: dict[str, int]


class AllocationRequest(TypedDict):
    """One allocation candidate, as Placement returns it, plus selection fields.

    ``mappings`` maps each request group suffix (``""`` for the unsuffixed group)
    to the providers that satisfy it; a resourceless group's provider appears
    there but not in ``allocations``. ``account`` is the account of the root of
    the non-sharing tree the candidate is anchored at.
    """

    allocations: dict[str, ProviderAllocation]
    mappings: dict[str, list[str]]
    account: NotRequired[Annotated[str | None, Field(default=None)]]
    priority_group: NotRequired[Annotated[int | None, Field(default=None)]]
    probability: NotRequired[Annotated[float | None, Field(default=None)]]
    cost_per_hour: NotRequired[Annotated[float | None, Field(default=None)]]


class ResourceSummary(TypedDict):
    capacity: int
    used: int


class ProviderSummary(TypedDict):
    """A provider of a tree some returned candidate touches: every resource class it
    has inventory of (``{}`` when none), its traits (sorted), parent and root."""

    resources: dict[str, ResourceSummary]
    traits: list[str]
    parent_provider_uuid: str | None
    root_provider_uuid: str


class PriorityGroup(TypedDict):
    priority: Annotated[int, Field(description="the group's rank: 0 is the most preferred")]
    probabilities: dict[str, float]


class TraceStep(TypedDict):
    module: str
    probabilities: Annotated[
        dict[str, float],
        Field(description="every account's probability within its group, groups in order"),
    ]
    groups: NotRequired[
        Annotated[
            list[dict[str, float]],
            Field(
                default_factory=list,
                description="the same probabilities split by priority group (most preferred first)",
            ),
        ]
    ]
    note: NotRequired[Annotated[str | None, Field(default=None)]]


class Selection(TypedDict):
    chosen: int
    account: str
    roll: float
    groups: list[PriorityGroup]
    trace: list[TraceStep]


class LaunchAttempt(TypedDict):
    """One launch tried by the worker's launcher hook (``launcher`` in config)."""

    attempt: int
    account: str
    chosen: int
    roll: float
    probabilities: Annotated[
        dict[str, float], Field(description="the dice's group at this attempt")
    ]
    failures: NotRequired[
        Annotated[
            dict[str, int] | None,
            Field(
                default=None,
                description="failure counts from the history store this selection used",
            ),
        ]
    ]
    ok: bool
    reason: NotRequired[Annotated[str | None, Field(default=None)]]


PolicySource = Literal["pool", "default", "inline", "file", "none"]


class PolicyRecord(TypedDict):
    """Which policy decided: a pool's version in the policy store, the store's default,
    the job's own, the default policy file, or none (candidates only)."""

    source: Annotated[
        PolicySource,
        Field(
            description="`pool`: the job's pool's own policy; `default`: the store's global "
            "default; `inline`: the job's `policy`; `file`: the default policy file (no "
            "store, or no default in it); `none`: no selection"
        ),
    ]
    pool: Annotated[
        str | None, Field(description="the store's pool whose policy decided (`pool`, `default`)")
    ]
    version: Annotated[int | None, Field(description="that pool's version (`pool`, `default`)")]


NO_POLICY: PolicyRecord = {"source": "none", "pool": None, "version": None}


class LaunchSelectResult(TypedDict):
    allocation_requests: list[AllocationRequest]
    provider_summaries: dict[str, ProviderSummary]
    selection: NotRequired[Annotated[Selection | None, Field(default=None)]]
    extra: NotRequired[Annotated[dict[str, Any], Field(default_factory=dict)]]
    # Set only when the worker runs a launcher: every attempt, and whether one succeeded.
    attempts: NotRequired[Annotated[list[LaunchAttempt] | None, Field(default=None)]]
    launched: NotRequired[Annotated[bool | None, Field(default=None)]]
    policy: NotRequired[
        Annotated[
            PolicyRecord | None,
            Field(
                default=None,
                description="which policy decided (docs/contract.md, 'Which policy decides'); "
                "always set by this version, absent from answers of versions before it",
            ),
        ]
    ]


def launch_result(
    allocation_requests: list[AllocationRequest],
    provider_summaries: dict[str, ProviderSummary],
    selection: Selection | None,
    extra: dict[str, Any],
    policy: PolicyRecord = NO_POLICY,
) -> LaunchSelectResult:
    """The engine's result, every key present, in schema order."""
    return {
        "allocation_requests": allocation_requests,
        "provider_summaries": provider_summaries,
        "selection": selection,
        "extra": extra,
        "attempts": None,
        "launched": None,
        "policy": PolicyRecord(
            source=policy["source"], pool=policy["pool"], version=policy["version"]
        ),
    }
