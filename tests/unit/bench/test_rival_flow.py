"""P10's pure parts: the template ministack gets, and the figures of both sides' runs."""

import yaml

from bench import rival_flow
from bench.rival_flow import Run, Workload

WORK = Workload(b"", frozenset(), (), frozenset({("SURVEY", "c1")}), {"+1": {}})
TEMPLATE = {
    "Resources": {
        "IngestFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {"CodeUri": "IngestFunction", "Handler": "app.lambda_handler"},
        },
        "SharedLayer": {
            "Type": "AWS::Serverless::LayerVersion",
            "Properties": {"ContentUri": "SharedLayer"},
        },
        "SurveyMailTemplate": {
            "Type": "AWS::SES::Template",
            "Properties": {
                "Template": {
                    "TemplateName": {"Fn::Sub": "${AWS::StackName}-survey"},
                    "SubjectPart": "How did we do?",
                }
            },
        },
    }
}


def test_ministack_gets_the_template_without_ses_templates_and_with_absolute_code_paths(tmp_path):
    built = tmp_path / "build" / "template.yaml"
    built.parent.mkdir()
    built.write_text(yaml.safe_dump(TEMPLATE))

    removed = rival_flow.derived_template(built, tmp_path / "derived.yaml")

    derived = yaml.safe_load((tmp_path / "derived.yaml").read_text())["Resources"]
    assert set(derived) == {"IngestFunction", "SharedLayer"}
    assert derived["IngestFunction"]["Properties"] == {
        "CodeUri": str(built.parent / "IngestFunction"),
        "Handler": "app.lambda_handler",
    }
    assert derived["SharedLayer"]["Properties"]["ContentUri"] == str(built.parent / "SharedLayer")
    assert removed == [TEMPLATE["Resources"]["SurveyMailTemplate"]["Properties"]]
    template = removed[0]["Template"]
    assert {name: rival_flow.with_stack_name(value, "s") for name, value in template.items()} == {
        "TemplateName": "s-survey",
        "SubjectPart": "How did we do?",
    }


def test_the_figures_are_our_rate_over_ministacks_end_to_end_and_for_the_ingest():
    ours = Run(warmed_up_in=1.0, ingested_at=20.0, done_at=50.0)
    rival = Run(warmed_up_in=1.0, ingested_at=10.0, done_at=100.0)

    end_to_end, ingest = rival_flow.figures(WORK, ours, rival)

    assert (end_to_end.id, end_to_end.value, end_to_end.holds) == ("P10", 2.0, None)
    assert ingest.value == 0.5
    assert "ministack: done in 100.0 s" in end_to_end.detail


def test_a_side_not_done_or_not_measured_gives_no_ratio_and_says_why():
    not_done = Run(ingested_at=10.0)

    end_to_end, ingest = rival_flow.figures(WORK, not_done, "sam deploy failed: Error: refused")

    assert end_to_end.value == ingest.value == 0
    assert "ours: NOT DONE within" in end_to_end.detail
    assert "ministack: NOT MEASURED: sam deploy failed: Error: refused" in ingest.detail
