"""The formats of a contact's id, a caller's number and an e-mail address (the input contract's,
DESIGN.md). Pure.

Apart from shared.model so that RouteFunction, which checks a live call's ids against them, and
NotifierFunction, which checks what it publishes, import patterns instead of the whole input
model (their cold start: P1).
"""

import re

CONTACT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
E164 = re.compile(r"\+[1-9][0-9]{6,14}")
# An internet address, ASCII only (the WHATWG form's rule, with a dot in the domain): no space,
# quote, CR or LF can reach a notification's subscribers.
EMAIL = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
)
MAX_EMAIL_LENGTH = 254


def is_email(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) <= MAX_EMAIL_LENGTH and bool(EMAIL.fullmatch(value))
    )
