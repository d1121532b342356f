"""samconfig.toml read as SAM CLI reads it: the stack name and the parameter overrides."""

from emulator.deploy.samconfig import load_samconfig, parse_parameter_overrides

SAMCONFIG = """
version = 0.1
[default.global.parameters]
stack_name = "tiny-stack"
[default.deploy.parameters]
parameter_overrides = "Greeting=\\"hi there\\""
"""


def test_samconfig_and_overrides(tmp_path):
    assert parse_parameter_overrides('A=1 B="two words" C=x=y') == {
        "A": "1",
        "B": "two words",
        "C": "x=y",
    }
    assert parse_parameter_overrides(["A=1", "B=2"]) == {"A": "1", "B": "2"}
    (tmp_path / "samconfig.toml").write_text(SAMCONFIG)
    config = load_samconfig(tmp_path / "samconfig.toml")
    assert config.stack_name == "tiny-stack"
    assert config.parameter_overrides == {"Greeting": "hi there"}
