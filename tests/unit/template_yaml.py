"""template.yaml as the unit tests read it (not a test module): parsed once, offline (cfn-lint's
decoder understands the short-form intrinsic tags), its resources by type, an alarm's threshold."""

from pathlib import Path

from cfnlint.decode.cfn_yaml import load as load_cfn_yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_cfn_yaml(str(ROOT / "template.yaml"))
RESOURCES = TEMPLATE["Resources"]


def of_type(resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in RESOURCES.items() if v["Type"] == resource_type}


def alarm_threshold(properties: dict) -> float:
    """An alarm's Threshold: its number in AlarmThresholds, the mapping the dashboard draws too."""
    mapping, top, second = properties["Threshold"]["Fn::FindInMap"]
    return TEMPLATE["Mappings"][mapping][top][second]
