"""The formats of a contact's id and a caller's number (the input contract's, DESIGN.md). Pure.

Apart from shared.model so that RouteFunction, which checks a live call's ids against them,
imports two patterns instead of the whole input model (its cold start: P1).
"""

import re

CONTACT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
E164 = re.compile(r"\+[1-9][0-9]{6,14}")
