"""The design's stream FilterCriteria, exactly: what each stream consumer must admit. Tests of the
template and of the filter matcher both hold the real template.yaml to these.

A contact's first export is INSERTed with first_export true; a newer export of it (a correction)
replaces it (a MODIFY, or a REMOVE and an INSERT when its sort key changed) with first_export
false. Surveys and gift cards come from first exports only (a re-export gets nothing new); the
last agent follows corrections, what they write and what they take away."""

_REACHED_AN_AGENT = {
    "type": {"S": ["CONTACT"]},
    "agent_id": {"S": [{"exists": True}]},
    "disposition": {"S": [{"anything-but": ["ABANDONED"]}]},
}
_WRITTEN = ["INSERT", "MODIFY"]
_FIRST_EXPORT = {"eventName": ["INSERT"]}
_CONTACT_FIRST_EXPORT = {"type": {"S": ["CONTACT"]}, "first_export": {"BOOL": [True]}}

STREAM_FILTERS = {
    "LastAgentFunction": [
        {"eventName": _WRITTEN, "dynamodb": {"NewImage": _REACHED_AN_AGENT}},
        {"eventName": ["MODIFY", "REMOVE"], "dynamodb": {"OldImage": _REACHED_AN_AGENT}},
    ],
    "SurveyFunction": [
        {
            **_FIRST_EXPORT,
            "dynamodb": {
                "NewImage": {
                    **_CONTACT_FIRST_EXPORT,
                    "disposition": {"S": ["RESOLVED"]},
                    "survey_opt_in": {"BOOL": [True]},
                    "email": {"S": [{"exists": True}]},
                }
            },
        }
    ],
    "GoodwillFunction": [
        {
            **_FIRST_EXPORT,
            "dynamodb": {
                "NewImage": {**_CONTACT_FIRST_EXPORT, "disposition": {"S": ["ABANDONED"]}}
            },
        },
        {
            **_FIRST_EXPORT,
            "dynamodb": {"NewImage": {**_CONTACT_FIRST_EXPORT, "long_wait": {"BOOL": [True]}}},
        },
    ],
}

# RouterFunction (FanOut=router) reads every contact change, written or taken away; the
# subscriptions pick per consumer.
STREAM_FILTERS["RouterFunction"] = [
    {"dynamodb": {"NewImage": {"type": {"S": ["CONTACT"]}}}},
    {"dynamodb": {"OldImage": {"type": {"S": ["CONTACT"]}}}},
]

# FanOut=router: each consumer's subscription filter policy, over the message attributes
# RouterFunction sets (shared.contacts.change_attributes), equivalent to its stream filter above
# (tests/unit/fanout prove it for arbitrary records). SNS allows at most five keys a policy, so
# an attribute folds "the image is a CONTACT" into the disposition and flags it carries.
_NOT_ABANDONED = [{"anything-but": ["ABANDONED"]}]
_FIRST_EXPORT_ATTRIBUTES = {"event_name": ["INSERT"], "new_first_export": ["true"]}

CHANGE_POLICIES = {
    "LastAgentFunction": {
        "$or": [
            {
                "event_name": _WRITTEN,
                "new_has_agent": ["true"],
                "new_disposition": _NOT_ABANDONED,
            },
            {
                "event_name": ["MODIFY", "REMOVE"],
                "old_has_agent": ["true"],
                "old_disposition": _NOT_ABANDONED,
            },
        ]
    },
    "SurveyFunction": {
        **_FIRST_EXPORT_ATTRIBUTES,
        "new_disposition": ["RESOLVED"],
        "new_survey_opt_in": ["true"],
        "new_has_email": ["true"],
    },
    "GoodwillFunction": {
        "$or": [
            {**_FIRST_EXPORT_ATTRIBUTES, "new_disposition": ["ABANDONED"]},
            {**_FIRST_EXPORT_ATTRIBUTES, "new_long_wait": ["true"]},
        ]
    },
}

# FanOut=pipe-topic: each consumer's subscription filter policy over the message body (the stream
# record ChangePipe publishes): its stream filter where SNS can hold it. SNS weighs a body
# policy's values by their nesting depth (a leaf four levels down counts 4, at most 150 a
# policy): Survey's five conditions weigh 1,024, so its policy holds three of them and its queue
# mapping the whole filter (QUEUE_FILTERS).
CHANGE_BODY_POLICIES = {
    "LastAgentFunction": {"$or": STREAM_FILTERS["LastAgentFunction"]},
    "SurveyFunction": {
        **_FIRST_EXPORT,
        "dynamodb": {
            "NewImage": {
                "first_export": {"BOOL": [True]},
                "disposition": {"S": ["RESOLVED"]},
                "survey_opt_in": {"BOOL": [True]},
            }
        },
    },
    "GoodwillFunction": {"$or": STREAM_FILTERS["GoodwillFunction"]},
}
# FanOut=pipe-topic: the consumer queue mappings' FilterCriteria (on the message body).
QUEUE_FILTERS = {"SurveyFunction": [{"body": STREAM_FILTERS["SurveyFunction"][0]}]}
