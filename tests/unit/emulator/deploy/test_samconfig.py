"""samconfig.toml read as SAM CLI reads it: the stack name and the parameter overrides."""

from emulator.deploy.samconfig import load_samconfig, parse_parameter_overrides

# as SAM CLI reads it: the deploy command's table over the global one
SAMCONFIG = """
version = 0.1
[default.global.parameters]
stack_name = "from-global"
region = "eu-west-1"
[default.deploy.parameters]
stack_name = "tiny-stack"
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
    assert (config.stack_name, config.region) == ("tiny-stack", "eu-west-1")
    assert config.parameter_overrides == {"Greeting": "hi there"}
