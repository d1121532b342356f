"""What the ops tests share (not a test module): the parsed arguments of an `ops idempotency`
command."""


def args(**values):
    defaults = dict.fromkeys(
        ("file", "version_id", "notification_id", "kind", "contact_id", "resend")
    )
    return type("Args", (), {**defaults, **values})()
