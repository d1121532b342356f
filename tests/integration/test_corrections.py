"""Corrections that take a caller's last agent away: the caller is no longer routed to that agent.
(This is also the path on which LastAgentFunction uses its dynamodb:DeleteItem grant, so every
integration run exercises it: template.yaml Metadata.UnusedGrants, `RarePath`.)"""

import pytest
from shared import keys

from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient

pytestmark = pytest.mark.integration


def test_a_correction_that_leaves_a_caller_no_agent_contact_removes_the_last_agent(
    stack: StackClient, files, contact_cleanup
):
    caller = new_caller()
    contact_cleanup.append(caller)
    only = contact(caller, minutes=5, agent_id="agent-only")
    files.put_jsonl("export.jsonl", [only])
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-only", timeout=60)

    # A later copy (a newer updated_at) says the call was abandoned before it reached an agent.
    newer = contact(caller, minutes=5, contact_id=only["contact_id"], updated_seconds=120)
    abandoned = {k: v for k, v in only.items() if k != "agent_id"} | {
        "disposition": "ABANDONED",
        "updated_at": newer["updated_at"],
    }
    files.put_jsonl("correction.jsonl", [abandoned])

    def no_agent() -> bool:
        [stored] = stack.contacts_of(caller)
        assert stored["disposition"] == {"S": "ABANDONED"}, stored
        assert stack.get_item(keys.last_agent_key(caller)) is None, "LAST_AGENT still there"
        return True

    eventually(no_agent, timeout=60)
    assert stack.route(caller) == {"found": "false"}
