"""Where each function's code and layers are, as SAM CLI resolves them: a fresh `sam build`
output, else the source next to the template."""

import os
from pathlib import Path

from emulator.deploy.function_code import local_code
from emulator.deploy.translate import load_template

TEMPLATE = """
Transform: AWS::Serverless-2016-10-31
Globals:
  Function:
    Runtime: python3.13
    Layers: [!Ref SharedLayer]
Resources:
  SharedLayer:
    Type: AWS::Serverless::LayerVersion
    Properties:
      ContentUri: layer/
    Metadata:
      BuildMethod: python3.13
  QueueFunction:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: src/fn/, Handler: app.lambda_handler}
  StreamFunction:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: src/fn/, Handler: app.lambda_handler}
"""


def write_project(root: Path) -> Path:
    (root / "src" / "fn").mkdir(parents=True)
    (root / "layer" / "helper").mkdir(parents=True)
    (root / "src" / "fn" / "app.py").write_text("def lambda_handler(event, context): ...\n")
    (root / "layer" / "helper" / "__init__.py").write_text("VALUE = 42\n")
    (root / "template.yaml").write_text(TEMPLATE)
    return root / "template.yaml"


def test_code_comes_from_a_fresh_build_else_from_the_source(tmp_path, capsys):
    template = write_project(tmp_path)
    build = tmp_path / ".aws-sam" / "build"
    for logical_id in ("QueueFunction", "StreamFunction"):
        (build / logical_id).mkdir(parents=True)
        (build / logical_id / "app.py").write_text("# built\n")
    (build / "SharedLayer" / "python" / "helper").mkdir(parents=True)
    (build / "SharedLayer" / "python" / "helper" / "__init__.py").write_text("VALUE = 1\n")
    code = local_code(load_template(template), tmp_path)
    assert code["QueueFunction"].code_dir == build / "QueueFunction"
    assert code["QueueFunction"].layer_dirs == [build / "SharedLayer" / "python"]

    old = (build / "QueueFunction" / "app.py").stat().st_mtime - 60
    os.utime(build / "QueueFunction" / "app.py", (old, old))  # the source was edited since
    code = local_code(load_template(template), tmp_path)
    assert code["QueueFunction"].code_dir == tmp_path / "src" / "fn"
    assert code["StreamFunction"].code_dir == build / "StreamFunction"
    assert "is older than src/fn" in capsys.readouterr().err
    local_code(load_template(template), tmp_path)
    assert capsys.readouterr().err == ""  # said once per process

    # one function's code (`invoke`): only its build is looked at
    assert set(local_code(load_template(template), tmp_path, only="StreamFunction")) == {
        "StreamFunction"
    }
