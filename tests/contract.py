"""The design's stream FilterCriteria, exactly: what each stream consumer must admit. Tests of the
template and of the filter matcher both hold the real template.yaml to these."""

STREAM_FILTERS = {
    "LastAgentFunction": [
        {
            "eventName": ["INSERT"],
            "dynamodb": {
                "NewImage": {
                    "type": {"S": ["CONTACT"]},
                    "agent_id": {"S": [{"exists": True}]},
                    "disposition": {"S": [{"anything-but": ["ABANDONED"]}]},
                }
            },
        }
    ],
    "SurveyFunction": [
        {
            "eventName": ["INSERT"],
            "dynamodb": {
                "NewImage": {
                    "type": {"S": ["CONTACT"]},
                    "disposition": {"S": ["RESOLVED"]},
                    "survey_opt_in": {"BOOL": [True]},
                    "email": {"S": [{"exists": True}]},
                }
            },
        }
    ],
    "GoodwillFunction": [
        {
            "eventName": ["INSERT"],
            "dynamodb": {
                "NewImage": {"type": {"S": ["CONTACT"]}, "disposition": {"S": ["ABANDONED"]}}
            },
        },
        {
            "eventName": ["INSERT"],
            "dynamodb": {"NewImage": {"type": {"S": ["CONTACT"]}, "long_wait": {"BOOL": [True]}}},
        },
    ],
}
