"""harness.mail: what a chaos run's verdict says of the e-mails SES accepted."""

from shared import mail

from harness import mail as last_hop


class Inbox:
    """The two reads of the stack the last hop's lines make: SES's inbox and MAIL_SENT."""

    def __init__(self, messages: list[dict], recorded: dict[str, dict]):
        self.messages, self.recorded = messages, recorded

    def inbox(self) -> list[dict]:
        return self.messages

    def mail_sent(self, notification_ids) -> dict[str, dict]:
        return {n: item for n, item in self.recorded.items() if n in set(notification_ids)}


def e_mail(notification_id: str, message_id: str, sent_at: str) -> dict:
    tags = {mail.NOTIFICATION_TAG: mail.tag_value(notification_id)}
    return {"message_id": message_id, "sent_at": sent_at, "tags": tags}


def test_a_notification_mailed_twice_is_named_with_each_e_mail_and_the_send_event_recorded():
    stack = Inbox(
        [
            e_mail("SURVEY#c-1", "m-1", "2026-12-07T17:23:07.100Z"),
            e_mail("GIFT_CARD#c-2", "m-2", "2026-12-07T17:23:08.000Z"),
            e_mail("SURVEY#c-1", "m-3", "2026-12-07T17:24:31.800Z"),
            e_mail("GIFT_CARD#c-3", "m-4", "2026-12-07T17:24:40.000Z"),
            e_mail("GIFT_CARD#c-3", "m-5", "2026-12-07T17:24:41.000Z"),
        ],
        {
            "SURVEY#c-1": {
                "message_id": {"S": "m-3"},
                "recorded_at": {"S": "2026-12-07T17:24:31.9Z"},
            }
        },
    )
    notifications = [
        {"notification_id": n} for n in ("SURVEY#c-1", "GIFT_CARD#c-2", "GIFT_CARD#c-3")
    ]

    assert last_hop.mailed_twice(stack, notifications) == [
        "GIFT_CARD#c-3: e-mails m-4 at 2026-12-07T17:24:40.000Z, m-5 at 2026-12-07T17:24:41.000Z; "
        "Send event recorded: none",
        "SURVEY#c-1: e-mails m-1 at 2026-12-07T17:23:07.100Z, m-3 at 2026-12-07T17:24:31.800Z; "
        "Send event recorded: m-3 at 2026-12-07T17:24:31.9Z",
    ]


def test_no_line_when_every_notification_is_one_e_mail():
    stack = Inbox([e_mail("SURVEY#c-1", "m-1", "2026-12-07T17:23:07.100Z")], {})

    assert last_hop.mailed_twice(stack, [{"notification_id": "SURVEY#c-1"}]) == []
