"""Amazon Connect contact records (CTRs, format "2017-03-10") as Connect streams them, and the S3
objects Kinesis Data Firehose writes of them: the input of the demo, the chaos runs, the bench and
the tests once the product reads Connect's own export instead of a home-made flat format.

What Connect does, and so what this generator does (AWS's "Data model for Amazon Connect contact
records", and records exported by real instances):

- One record per *leg*: a contact that is transferred, moved to another queue or called back
  becomes several contacts, one record each. A record carries every field, null when it does not
  apply (`Agent` null when no agent took the leg, `Queue` null when it never queued, ...).
- Legs are chained: `PreviousContactId` and `NextContactId` name the neighbours (null on the first
  and the last leg), and every leg but the first names the first leg in `InitialContactId`. The
  first leg's own `InitialContactId` is null, as is a single-leg contact's: the interaction's id
  is `InitialContactId or ContactId` (`interaction_id`).
- Timestamps are UTC, whole seconds, `Z`; durations are whole seconds.
- `Attributes` are the flow's user-defined attributes, string to string, copied to each new leg.
- A record is delivered at least once, and again when it changes (`update-contact-attributes`):
  the copy with the newest `LastUpdateTimestamp` wins (`redelivered`).
- Firehose writes the records as Connect sent them, one compact JSON object each, with nothing
  between them unless the stream appends a delimiter (`firehose_object`), under keys of the form
  `contact-records/YYYY/MM/dd/HH/<stream>-1-<yyyy-MM-dd-HH-mm-ss>-<uuid>[.gz]` (`firehose_key`).

Everything is drawn from the `random.Random` passed in, so a seed gives the same records; the
contact center's directory (instance, queues, agents, hierarchy) is fixed, so agents recur across
calls as they do in a real center. Callers are in the fictional +1555 range.

`python -m harness.connect_records [directory]` writes the sample Firehose objects of
events/data/ (`sample_objects`).
"""

from __future__ import annotations

import gzip as gzip_codec
import json
import random
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.model import SurveyAttributes

import harness  # noqa: F401 (the layer on sys.path)

FORMAT_VERSION = "2017-03-10"
ACCOUNT_ID = "111122223333"
REGION = "us-east-1"
LONG_WAIT_SECONDS = 600  # a queue wait this long earns a goodwill gift card

# How often each kind of interaction happens in the records() mix (weights).
DEFAULT_MIX: Mapping[str, int] = {
    "handled": 40,  # inbound call, queued, answered by an agent
    "abandoned": 12,  # inbound call, hung up in the queue
    "transferred": 9,  # agent to agent: two legs
    "transferred_twice": 4,  # three legs
    "external_transfer": 2,  # the agent hands the caller to a number outside Connect
    "callback": 5,  # the caller asked to be called back: two legs
    "outbound": 6,  # an agent dials the customer
    "chat": 10,
    "task": 4,
    "self_service": 8,  # served by the IVR alone, never queued
}
KINDS = tuple(DEFAULT_MIX)
_LEGS = {"transferred": 2, "transferred_twice": 3, "callback": 2}


# The contact attributes that carry the survey opt-in ("true"/"false") and the customer's email,
# by the names the ingest reads (a center names its own: template parameters).
SURVEY_ATTRIBUTES = SurveyAttributes()


def leg_count(kind: str) -> int:
    """How many records (legs) an interaction of `kind` makes."""
    if kind not in DEFAULT_MIX:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    return _LEGS.get(kind, 1)


def interaction_id(record: Mapping[str, Any]) -> str:
    """The id the legs of one interaction share: the first leg's ContactId, which Connect writes
    as InitialContactId on every later leg and leaves null on the first."""
    return record["InitialContactId"] or record["ContactId"]


def new_caller(rng: random.Random) -> str:
    """An E.164 number in the fictional +1555 range."""
    return f"+1555{rng.randrange(10**7):07d}"


def new_id(rng: random.Random) -> str:
    """A contact or resource id as Connect makes them: a version 4 UUID."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# --- the contact center's directory: fixed, so agents, queues and groups recur -------------------


@dataclass(frozen=True)
class _Agent:
    arn: str
    username: str
    hierarchy: dict
    routing_profile: dict
    device: dict


# The queues a customer's call or chat waits in (the rest serve callbacks, outbound calls, ...).
INBOUND_QUEUE_NAMES = (
    "Billing",
    "Technical Support",
    "Sales",
    "Claims",
    "Kundenservice Deutsch",
    "Atención al cliente",
)


def _directory() -> tuple[str, dict[str, dict], list[_Agent]]:
    """The instance's id, its queues ({name: {ARN, Name}}) and forty agents, drawn from a fixed
    seed: resource ARNs are long and nested, which is much of why a real record is several KB."""
    rng = random.Random("amazon-connect-directory")  # noqa: S311 (test data)
    instance = new_id(rng)
    arn = f"arn:aws:connect:{REGION}:{ACCOUNT_ID}:instance/{instance}"
    queues = {
        name: {"ARN": f"{arn}/queue/{new_id(rng)}", "Name": name}
        for name in (
            *INBOUND_QUEUE_NAMES,
            "Overflow",
            "Callbacks",
            "Outbound",
            "Chat Support",
            "Back Office",
        )
    }
    levels = (
        ("North America", "EMEA"),
        ("Austin", "Toronto", "Dublin", "Leipzig"),
        ("Customer Care", "Billing Operations", "Technical Support", "Sales"),
        tuple(f"Team {n:02d}" for n in range(1, 9)),
    )
    groups = [{name: f"{arn}/agent-group/{new_id(rng)}" for name in level} for level in levels]
    profiles = {
        name: {"ARN": f"{arn}/routing-profile/{new_id(rng)}", "Name": name}
        for name in ("Voice Tier 1", "Voice Tier 2 Billing", "Omnichannel", "Back Office Tasks")
    }
    first = ("ana", "ben", "chloe", "dmitri", "esra", "felix", "grace", "hiro", "ines", "jamal")
    last = ("alvarez", "brennan", "costa", "dubois", "eriksen", "fischer", "garcia", "haddad")
    agents = []
    for n in range(40):
        hierarchy: dict[str, dict | None] = {
            f"Level{depth}": {"ARN": groups[depth - 1][name], "GroupName": name}
            for depth, name in enumerate((rng.choice(level) for level in levels), start=1)
        }
        hierarchy["Level5"] = None  # the center configures four levels
        agents.append(
            _Agent(
                arn=f"{arn}/agent/{new_id(rng)}",
                username=f"{first[n % len(first)]}.{rng.choice(last)}{n:02d}",
                hierarchy=hierarchy,
                routing_profile=profiles[rng.choice(tuple(profiles))],
                device={
                    "OperatingSystem": rng.choice(("Windows 11", "macOS 15.1", "ChromeOS")),
                    "PlatformName": rng.choice(("Chrome", "Edge", "Firefox")),
                    "PlatformVersion": f"{rng.randint(128, 131)}.0.{rng.randint(1000, 6999)}",
                },
            )
        )
    return instance, queues, agents


INSTANCE_ID, QUEUES, AGENTS = _directory()
INSTANCE_ARN = f"arn:aws:connect:{REGION}:{ACCOUNT_ID}:instance/{INSTANCE_ID}"
DIALED_NUMBERS = ("+18005550100", "+18005550123")  # the center's numbers (fictional 555-01xx)
OUTBOUND_CALLER_ID = "+18005550199"
EXTERNAL_DESKS = ("+18005550142", "+18005550167")  # partners the agents transfer callers out to
_RECORDINGS_BUCKET = "amazon-connect-3f1e0c2a9b7d/connect/acme-care"


# --- interactions --------------------------------------------------------------------------------


def interaction(
    rng: random.Random,
    *,
    caller: str,
    started: datetime,
    kind: str,
    attribute_names: SurveyAttributes = SURVEY_ATTRIBUTES,
) -> list[dict]:
    """The records of one interaction of `kind` (one of KINDS), its legs in order, the first
    initiated at `started` by (or, for an outbound call, to) `caller`."""
    leg_count(kind)  # refuses an unknown kind
    start = started.astimezone(UTC).replace(microsecond=0)
    build = _Interaction(rng, caller, start, _attributes(rng, caller, kind, attribute_names))
    legs = getattr(build, kind)()
    for n, leg in enumerate(legs):
        leg["InitialContactId"] = legs[0]["ContactId"] if n else None
        leg["PreviousContactId"] = legs[n - 1]["ContactId"] if n else None
        leg["NextContactId"] = legs[n + 1]["ContactId"] if n + 1 < len(legs) else None
    return [dict(sorted(leg.items())) for leg in legs]


def records(
    rng: random.Random,
    count: int,
    *,
    start: datetime,
    callers: Sequence[str] | None = None,
    mix: Mapping[str, int] = DEFAULT_MIX,
    attribute_names: SurveyAttributes = SURVEY_ATTRIBUTES,
) -> list[dict]:
    """The records of `count` interactions (so at least `count` records: see leg_count) arriving
    from `start` about every 30 seconds, of kinds drawn by the `mix` weights, from `callers` (by
    default a pool of count/4 callers, so callers call again). Ordered by LastUpdateTimestamp,
    as Connect streams them: each once it is complete, the legs of interactions interleaved."""
    pool = list(callers) if callers else [new_caller(rng) for _ in range(max(1, count // 4))]
    kinds, weights = list(mix), list(mix.values())
    legs: list[dict] = []
    at = start
    for _ in range(count):
        at += timedelta(seconds=round(rng.expovariate(1 / 30)))
        kind = rng.choices(kinds, weights)[0]
        legs += interaction(
            rng, caller=rng.choice(pool), started=at, kind=kind, attribute_names=attribute_names
        )
    legs.sort(key=lambda leg: leg["LastUpdateTimestamp"])
    return legs


def redelivered(record: Mapping[str, Any], *, seconds: int) -> dict:
    """Another delivery of `record` with its LastUpdateTimestamp moved by `seconds`. A newer copy
    (seconds > 0) is what Connect sends after `update-contact-attributes`: here the CRM closing
    the case; an older or equal one is the same content, as a late or repeated delivery is."""
    copy = json.loads(json.dumps(record))
    updated = _parse(record["LastUpdateTimestamp"]) + timedelta(seconds=seconds)
    copy["LastUpdateTimestamp"] = _ts(updated)
    if seconds > 0:
        copy["Attributes"]["crm_case_status"] = "closed"
    return copy


class _Interaction:
    """One interaction's legs, kind by kind; each method returns its legs unchained (interaction()
    links them)."""

    def __init__(self, rng: random.Random, caller: str, start: datetime, attributes: dict):
        self.rng = rng
        self.caller = caller
        self.start = start
        self.attributes = attributes

    def handled(self) -> list[dict]:
        leg, _ = self._inbound_answered(self.start, _queue_wait(self.rng, long_share=0.15))
        return [leg]

    def abandoned(self) -> list[dict]:
        rng = self.rng
        leg = self._voice("INBOUND", self.start, system=rng.choice(DIALED_NUMBERS))
        enqueued = self.start + _s(rng.randint(20, 90))
        wait = _queue_wait(rng, long_share=0.3)
        hung_up = enqueued + _s(wait)
        leg.update(
            AgentConnectionAttempts=rng.choices((0, 1), (4, 1))[0],  # offered, not answered
            Queue=_queue(rng.choice(_INBOUND_QUEUES), enqueued, hung_up),
            DisconnectReason="CUSTOMER_DISCONNECT",
            DisconnectTimestamp=_ts(hung_up),
            LastUpdateTimestamp=_ts(hung_up + _s(rng.randint(20, 120))),
        )
        return [leg]

    def transferred(self) -> list[dict]:
        wait = _queue_wait(self.rng, 0.1)
        first, handed_over = self._inbound_answered(self.start, wait, transfers=True)
        return [first, self._transfer_leg(handed_over)]

    def transferred_twice(self) -> list[dict]:
        """Agent to agent twice, or first moved to another queue by the queue's flow while
        waiting (QUEUE_TRANSFER: that leg has a Queue and no Agent, yet was not abandoned), then
        agent to agent."""
        rng = self.rng
        if rng.random() < 0.5:
            wait = _queue_wait(rng, 0.1)
            first, handed_over = self._inbound_answered(self.start, wait, transfers=True)
            second = self._transfer_leg(handed_over, transfers=True)
        else:
            first = self._voice("INBOUND", self.start, system=rng.choice(DIALED_NUMBERS))
            enqueued = self.start + _s(rng.randint(20, 90))
            moved = enqueued + _s(rng.randint(120, 900))
            first.update(
                AgentConnectionAttempts=rng.randint(0, 2),
                Queue=_queue(rng.choice(_INBOUND_QUEUES), enqueued, moved),
                DisconnectTimestamp=_ts(moved),  # ended by the flow: no DisconnectReason
                LastUpdateTimestamp=_ts(moved + _s(rng.randint(20, 120))),
            )
            second = self._voice("QUEUE_TRANSFER", moved, system=None)
            self._answer(second, "Overflow", moved, _queue_wait(rng, 0.2), transfers=True)
        handed_over = _parse(second["DisconnectTimestamp"])
        return [first, second, self._transfer_leg(handed_over)]

    def external_transfer(self) -> list[dict]:
        """The agent hands the caller to a desk outside Connect: the call stays bridged through
        Connect, so this one leg records where it went and when the desk answered, and ends when
        the caller and the desk hang up."""
        rng = self.rng
        leg, agent_left = self._inbound_answered(self.start, _queue_wait(rng, 0.15))
        desk_answered = agent_left - _s(rng.randint(5, 40))
        hung_up = agent_left + _s(rng.randint(60, 900))
        settled = max(hung_up, _parse(leg["Agent"]["AfterContactWorkEndTimestamp"]))
        leg.update(
            TransferCompletedTimestamp=_ts(desk_answered),
            TransferredToEndpoint={
                "Address": rng.choice(EXTERNAL_DESKS),
                "Type": "TELEPHONE_NUMBER",
            },
            DisconnectReason=rng.choice(("THIRD_PARTY_DISCONNECT", "CUSTOMER_DISCONNECT")),
            DisconnectTimestamp=_ts(hung_up),
            LastUpdateTimestamp=_ts(settled + _s(rng.randint(20, 120))),
        )
        return [leg]

    def callback(self) -> list[dict]:
        """The caller waits, asks to be called back and hangs up (the flow ends that leg: a Queue,
        no Agent, not abandoned); the CALLBACK leg is queued in Callbacks until an agent takes it
        and Connect dials the caller."""
        rng = self.rng
        first = self._voice("INBOUND", self.start, system=rng.choice(DIALED_NUMBERS))
        enqueued = self.start + _s(rng.randint(20, 90))
        requested = enqueued + _s(rng.randint(60, 400))
        self.attributes.update(callback_requested="true", callback_number=self.caller)
        first.update(
            Attributes=dict(self.attributes),
            Queue=_queue(rng.choice(_INBOUND_QUEUES), enqueued, requested),
            DisconnectReason="CONTACT_FLOW_DISCONNECT",
            DisconnectTimestamp=_ts(requested),
            LastUpdateTimestamp=_ts(requested + _s(rng.randint(20, 120))),
        )
        second = self._voice("CALLBACK", requested, system=None)
        queued = requested + _s(rng.randint(0, 30))  # the callback's initial delay
        self._answer(second, "Callbacks", queued, _queue_wait(rng, 0.3))
        answered = _parse(second["Agent"]["ConnectedToAgentTimestamp"]) + _s(rng.randint(5, 25))
        second["ConnectedToSystemTimestamp"] = _ts(answered)  # the caller picks up
        return [first, second]

    def outbound(self) -> list[dict]:
        rng = self.rng
        leg = self._voice("OUTBOUND", self.start, system=OUTBOUND_CALLER_ID)
        agent, hung_up, done = _agent(rng, rng.choice(AGENTS), self.start, holds=True)
        leg.update(
            Agent=agent,
            ConnectedToSystemTimestamp=_ts(self.start + _s(rng.randint(5, 30))),  # answered
            Queue={
                **QUEUES["Outbound"],
                "DequeueTimestamp": None,
                "Duration": 0,
                "EnqueueTimestamp": None,
            },
            DisconnectReason=rng.choice(("AGENT_DISCONNECT", "CUSTOMER_DISCONNECT")),
            DisconnectTimestamp=_ts(hung_up),
            LastUpdateTimestamp=_ts(done + _s(rng.randint(20, 120))),
            **_recordings(leg["ContactId"], self.start, hung_up, "AUDIO"),
        )
        return [leg]

    def chat(self) -> list[dict]:
        """A web chat (StartChatContact: InitiationMethod API): no telephone endpoints, a
        transcript instead of a recording; the phone number only as a pre-chat form attribute."""
        rng = self.rng
        self.attributes.update(customer_phone=self.caller, chat_origin="website")
        leg = _blank(new_id(rng), "CHAT", "API", self.attributes)
        leg.update(ConnectedToSystemTimestamp=_ts(self.start), InitiationTimestamp=_ts(self.start))
        enqueued = self.start + _s(rng.randint(5, 60))
        connected = enqueued + _s(_queue_wait(rng, long_share=0.1))
        agent, ended, done = _agent(rng, rng.choice(AGENTS), connected, holds=False)
        leg.update(
            Agent=agent,
            AgentConnectionAttempts=1,
            Queue=_queue(QUEUES["Chat Support"], enqueued, connected),
            DisconnectReason=rng.choice(("CUSTOMER_DISCONNECT", "AGENT_DISCONNECT")),
            DisconnectTimestamp=_ts(ended),
            LastUpdateTimestamp=_ts(done + _s(rng.randint(20, 120))),
            Recordings=_recordings(leg["ContactId"], connected, ended, "CHAT")["Recordings"],
        )
        return [leg]

    def task(self) -> list[dict]:
        """A back-office task from the CRM (StartTaskContact: API): a reference and a name instead
        of endpoints; tasks wait in their queue for minutes to hours, by design."""
        rng = self.rng
        case = self.attributes["crm_case_id"]
        attributes = {k: self.attributes[k] for k in _TASK_ATTRIBUTES}
        leg = _blank(new_id(rng), "TASK", "API", {**attributes, "customer_phone": self.caller})
        enqueued = self.start + _s(rng.randint(1, 5))
        connected = enqueued + _s(rng.randint(60, 4 * 3600))
        agent, completed, done = _agent(rng, rng.choice(AGENTS), connected, holds=False)
        leg.update(
            Agent=agent,
            AgentConnectionAttempts=rng.randint(1, 2),
            ConnectedToSystemTimestamp=_ts(self.start),
            ContactDetails={
                "Name": f"Follow up {case}",
                "Description": "Customer disputes a charge; check the invoice and call back.",
            },
            InitiationTimestamp=_ts(self.start),
            Queue=_queue(QUEUES["Back Office"], enqueued, connected),
            References=[
                {
                    "Name": "CRM case",
                    "Type": "URL",
                    "Value": f"https://crm.example.com/cases/{case}",
                }
            ],
            DisconnectReason="AGENT_DISCONNECT",  # the agent completed the task
            DisconnectTimestamp=_ts(completed),
            LastUpdateTimestamp=_ts(done + _s(rng.randint(20, 120))),
        )
        return [leg]

    def self_service(self) -> list[dict]:
        rng = self.rng
        leg = self._voice("INBOUND", self.start, system=rng.choice(DIALED_NUMBERS))
        ended = self.start + _s(rng.randint(30, 300))
        self.attributes["self_service_outcome"] = rng.choice(
            ("balance_read", "payment_taken", "address_updated", "opening_hours")
        )
        leg.update(
            Attributes=dict(self.attributes),
            DisconnectReason=rng.choices(
                ("CUSTOMER_DISCONNECT", "CONTACT_FLOW_DISCONNECT"), (4, 1)
            )[0],
            DisconnectTimestamp=_ts(ended),
            LastUpdateTimestamp=_ts(ended + _s(rng.randint(20, 120))),
        )
        return [leg]

    # legs in common

    def _voice(self, method: str, initiated: datetime, *, system: str | None) -> dict:
        """A voice leg's skeleton: the caller's number, the number dialed (none on a callback or
        a queue transfer), connected to the system when initiated."""
        leg = _blank(new_id(self.rng), "VOICE", method, self.attributes)
        leg.update(
            ConnectedToSystemTimestamp=_ts(initiated),
            CustomerEndpoint={"Address": self.caller, "Type": "TELEPHONE_NUMBER"},
            InitiationTimestamp=_ts(initiated),
            SystemEndpoint=system and {"Address": system, "Type": "TELEPHONE_NUMBER"},
        )
        if system:
            leg["Tags"]["aws:connect:systemEndpoint"] = system
        return leg

    def _inbound_answered(
        self, start: datetime, wait: int, *, transfers: bool = False
    ) -> tuple[dict, datetime]:
        """An inbound call: the IVR, `wait` seconds in a queue, an agent. Returns the leg and
        when the agent's part ended (where a transfer hands the caller over)."""
        leg = self._voice("INBOUND", start, system=self.rng.choice(DIALED_NUMBERS))
        enqueued = start + _s(self.rng.randint(20, 90))
        self._answer(leg, self.rng.choice(_INBOUND_QUEUES), enqueued, wait, transfers=transfers)
        return leg, _parse(leg["DisconnectTimestamp"])

    def _transfer_leg(self, handed_over: datetime, *, transfers: bool = False) -> dict:
        """The leg an agent's transfer (quick connect to a queue) opens: initiated as the agent
        starts it, queued with priority, answered by another agent."""
        initiated = handed_over - _s(self.rng.randint(10, 60))
        self.attributes["transfer_reason"] = self.rng.choice(("billing", "escalation", "language"))
        leg = self._voice("TRANSFER", initiated, system=None)
        wait = _queue_wait(self.rng, 0.05)
        self._answer(leg, self.rng.choice(_INBOUND_QUEUES), handed_over, wait, transfers=transfers)
        return leg

    def _answer(
        self,
        leg: dict,
        queue: str | dict,
        enqueued: datetime,
        wait: int,
        *,
        transfers: bool = False,
    ) -> None:
        """Queue `leg` at `enqueued` for `wait` seconds, then an agent takes it: the Agent,
        Queue, recording and end of an answered leg."""
        rng = self.rng
        queue = QUEUES[queue] if isinstance(queue, str) else queue
        connected = enqueued + _s(wait)
        agent, hung_up, done = _agent(rng, rng.choice(AGENTS), connected, holds=True)
        reasons = ("CUSTOMER_DISCONNECT", "AGENT_DISCONNECT", "TELECOM_PROBLEM")
        leg.update(
            Agent=agent,
            AgentConnectionAttempts=rng.choices((1, 2), (9, 1))[0],
            Attributes=dict(self.attributes),
            Queue=_queue(queue, enqueued, connected),
            # a cold transfer: the agent leaves while the caller is still on the call
            DisconnectReason="AGENT_DISCONNECT"
            if transfers
            else rng.choices(reasons, (70, 28, 2))[0],
            DisconnectTimestamp=_ts(hung_up),
            LastUpdateTimestamp=_ts(done + _s(rng.randint(20, 120))),
            **_recordings(leg["ContactId"], connected, hung_up, "AUDIO"),
        )


_INBOUND_QUEUES = tuple(QUEUES[name] for name in INBOUND_QUEUE_NAMES)
_TASK_ATTRIBUTES = ("account_id", "account_tier", "crm_case_id", "crm_case_status", "region")


def _blank(contact_id: str, channel: str, method: str, attributes: dict) -> dict:
    """Every field of a record, as Connect writes one: present, null when it does not apply."""
    return {
        "AWSAccountId": ACCOUNT_ID,
        "AWSContactTraceRecordFormatVersion": FORMAT_VERSION,
        "Agent": None,
        "AgentConnectionAttempts": 0,
        "AnsweringMachineDetectionStatus": None,
        "Attributes": dict(attributes),
        "Campaign": {"CampaignId": None},
        "Channel": channel,
        "ConnectedToSystemTimestamp": None,
        "ContactDetails": {},
        "ContactId": contact_id,
        "CustomerEndpoint": None,
        "DisconnectReason": None,
        "DisconnectTimestamp": None,
        "InitialContactId": None,
        "InitiationMethod": method,
        "InitiationTimestamp": None,
        "InstanceARN": INSTANCE_ARN,
        "LastUpdateTimestamp": None,
        "MediaStreams": [] if channel == "TASK" else [{"Type": _MEDIA[channel]}],
        "NextContactId": None,
        "PreviousContactId": None,
        "Queue": None,
        "Recording": None,
        "Recordings": None,
        "References": [],
        "RelatedContactId": None,
        "ScheduledTimestamp": None,
        "SystemEndpoint": None,
        "Tags": {"aws:connect:instanceId": INSTANCE_ID},
        "TransferCompletedTimestamp": None,
        "TransferredToEndpoint": None,
        "VoiceIdResult": None,
    }


_MEDIA = {"VOICE": "AUDIO", "CHAT": "CHAT"}


def _attributes(
    rng: random.Random, caller: str, kind: str, names: SurveyAttributes
) -> dict[str, str]:
    """What a center's flows set: IVR choices, the CRM's account and case, the survey question."""
    intents = ("billing", "technical_support", "sales", "claims", "account_update", "cancel")
    intent = rng.choice(intents)
    account = f"ACC-{rng.randrange(10**8):08d}"
    authenticated = rng.random() < 0.7
    attributes = {
        "account_id": account,
        "account_tier": rng.choices(("bronze", "silver", "gold", "platinum"), (5, 3, 2, 1))[0],
        "auth_method": rng.choice(("pin", "sms_otp", "voice_pin")) if authenticated else "none",
        "authenticated": _flag(authenticated),
        "crm_case_id": f"CS-{rng.randrange(10**7):07d}",
        "crm_case_status": "open",
        "customer_segment": rng.choice(("consumer", "small_business", "enterprise")),
        "estimated_wait_seconds": str(rng.randrange(0, 900, 15)),
        "flow_version": f"inbound-main-v{rng.randint(38, 44)}",
        "greeting_played": "true",
        "ivr_intent": intent,
        "ivr_language": rng.choices(("en-US", "es-US", "de-DE", "fr-CA"), (12, 4, 2, 1))[0],
        "ivr_menu_path": f"main>{intents.index(intent) + 1}>{rng.randint(1, 4)}",
        "ivr_retries": str(rng.choices((0, 1, 2), (8, 3, 1))[0]),
        "marketing_consent": _flag(rng.random() < 0.4),
        "region": rng.choice(("us-east", "us-central", "us-west", "ca-east", "eu-central")),
    }
    if kind != "outbound" and rng.random() < 0.85:  # asked in the IVR or the pre-chat form
        attributes[names.opt_in] = _flag(rng.random() < 0.55)
    if rng.random() < 0.7:  # found in the CRM
        attributes[names.email] = f"{account.lower()}@{rng.choice(_MAIL_DOMAINS)}"
    return attributes


_MAIL_DOMAINS = ("example.com", "example.org", "example.net")


def _agent(
    rng: random.Random, agent: _Agent, connected: datetime, *, holds: bool
) -> tuple[dict, datetime, datetime]:
    """The Agent block of a leg `agent` took at `connected`; returns it, when the agent's part
    ended and when their after contact work ended."""
    count = rng.choices((0, 1, 2), (14, 4, 2))[0] if holds else 0
    hold_times = [rng.randint(10, 240) for _ in range(count)]
    talk = rng.randint(45, 1500)
    ended = connected + _s(talk + sum(hold_times))
    after_work = rng.randint(5, 180)
    done = ended + _s(after_work)
    block = {
        "ARN": agent.arn,
        "AfterContactWorkDuration": after_work,
        "AfterContactWorkEndTimestamp": _ts(done),
        "AfterContactWorkStartTimestamp": _ts(ended),
        "AgentInteractionDuration": talk,
        "AgentPauseDuration": 0,
        "Capabilities": None,
        "ConnectedToAgentTimestamp": _ts(connected),
        "CustomerHoldDuration": sum(hold_times),
        "DeviceInfo": dict(agent.device),
        "HierarchyGroups": json.loads(json.dumps(agent.hierarchy)),
        "LongestHoldDuration": max(hold_times, default=0),
        "NumberOfHolds": len(hold_times),
        "RoutingProfile": dict(agent.routing_profile),
        "StateTransitions": None,
        "Username": agent.username,
    }
    return block, ended, done


def _queue(queue: dict, enqueued: datetime, dequeued: datetime) -> dict:
    return {
        "ARN": queue["ARN"],
        "DequeueTimestamp": _ts(dequeued),
        "Duration": int((dequeued - enqueued).total_seconds()),
        "EnqueueTimestamp": _ts(enqueued),
        "Name": queue["Name"],
    }


def _queue_wait(rng: random.Random, long_share: float) -> int:
    """Seconds in a queue: mostly a minute or two, `long_share` of waits LONG_WAIT_SECONDS+."""
    if rng.random() < long_share:
        return rng.randint(LONG_WAIT_SECONDS, 1800)
    return min(3 + round(rng.expovariate(1 / 75)), LONG_WAIT_SECONDS - 1)


def _recordings(contact_id: str, started: datetime, stopped: datetime, media: str) -> dict:
    """A call recording (Recording, and the first of Recordings, as Connect repeats it) or a
    chat transcript (Recordings only), in the instance's S3 bucket."""
    folder, suffix = ("CallRecordings", "wav") if media == "AUDIO" else ("ChatTranscripts", "json")
    location = (
        f"{_RECORDINGS_BUCKET}/{folder}/{started:%Y/%m/%d}/"
        f"{contact_id}_{started:%Y%m%dT%H:%M}_UTC.{suffix}"
    )
    recording = {
        "DeletionReason": None,
        "FragmentStartNumber": None,
        "FragmentStopNumber": None,
        "Location": location,
        "MediaStreamType": media,
        "ParticipantType": None,
        "StartTimestamp": _ts(started),
        "Status": "AVAILABLE",
        "StopTimestamp": _ts(stopped),
        "StorageType": "S3",
    }
    legacy = {"DeletionReason": None, "Location": location, "Status": "AVAILABLE", "Type": "AUDIO"}
    return {"Recording": legacy if media == "AUDIO" else None, "Recordings": [recording]}


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _s(seconds: int) -> timedelta:
    return timedelta(seconds=seconds)


def _ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


# --- Firehose ------------------------------------------------------------------------------------


def firehose_object(records: Iterable[Mapping[str, Any]], *, newline: bool, gzip: bool) -> bytes:
    """An S3 object as Firehose writes it: each record's compact JSON as Connect sent it,
    concatenated with nothing between them, or each followed by "\\n" when the stream has the
    AppendDelimiterToRecord processor; GZIP compresses the whole object (mtime 0: reproducible)."""
    end = b"\n" if newline else b""
    body = b"".join(
        json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + end
        for record in records
    )
    return gzip_codec.compress(body, mtime=0) if gzip else body


def firehose_key(
    stream_name: str,
    when: datetime,
    *,
    gzip: bool,
    prefix: str = "contact-records/",
    object_id: uuid.UUID | None = None,
) -> str:
    """The key Firehose gives an object it writes at `when` (UTC): `<prefix>YYYY/MM/dd/HH/
    <stream>-1-<yyyy-MM-dd-HH-mm-ss>-<uuid>`, `.gz` when GZIP. `object_id` fixes the uuid part
    (random by default, as Firehose's is)."""
    at = when.astimezone(UTC)
    suffix = ".gz" if gzip else ""
    return (
        f"{prefix}{at:%Y/%m/%d/%H}/{stream_name}-1-{at:%Y-%m-%d-%H-%M-%S}-"
        f"{object_id or uuid.uuid4()}{suffix}"
    )


# --- the sample events ---------------------------------------------------------------------------

SAMPLE_STREAM = (
    "last-agent-routing-contact-records"  # template.yaml: ${AWS::StackName}-contact-records
)


def sample_records() -> list[dict]:
    """The records of the sample objects in events/data/: a handled call, an abandoned call, a
    call transferred twice (three legs), a chat, and the handled call again, delivered an hour
    later with an attribute changed. Fixed seed and times (2026-11-30, 08:00-09:00 UTC)."""
    rng = random.Random(20261130)  # noqa: S311 (test data)
    at = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    legs = [
        *interaction(rng, caller="+15555550101", started=at, kind="handled"),
        *interaction(rng, caller="+15555550178", started=at + _s(300), kind="abandoned"),
        *interaction(rng, caller="+15555550142", started=at + _s(420), kind="transferred_twice"),
        *interaction(rng, caller="+15555550101", started=at + _s(900), kind="chat"),
    ]
    return [*legs, redelivered(legs[0], seconds=3600)]


def sample_objects() -> dict[str, bytes]:
    """The files of events/data/ by name: the same records newline-delimited, concatenated,
    and gzipped (newline-delimited)."""
    recs = sample_records()
    return {
        "contact-records-newline": firehose_object(recs, newline=True, gzip=False),
        "contact-records-concatenated": firehose_object(recs, newline=False, gzip=False),
        "contact-records.gz": firehose_object(recs, newline=True, gzip=True),
    }


def main(argv: Sequence[str]) -> None:
    folder = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "events" / "data"
    for name, body in sample_objects().items():
        (folder / name).write_bytes(body)
        print(f"{folder / name}: {len(body):,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
