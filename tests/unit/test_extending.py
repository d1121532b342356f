"""docs/extending.md's walkthrough, built as written into a scratch copy of the project, where
the new consumer's own tests (the walkthrough's last block) pass in every fan-out mode's delivery.

Each block marked `<!-- walkthrough: <how> <path> -->` goes into the copy: `write` a new file;
`merge` a Python module: each top-level name the block defines replaces the module's statement
of that name in place, and a new one goes right before the next replaced one (a constant a
replaced tuple names comes before it) or at the end; `resources` and `outputs` YAML entries under
template.yaml's section of that name. What is copied is the project's source, so the copy tests
the walkthrough against the code as it is now."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from cfnlint.decode import cfn_yaml

from emulator.deploy.translate import load_template, translate
from tests.doc_blocks import ROOT, Block, blocks

DOC = ROOT / "docs" / "extending.md"
# The source the walkthrough touches or its tests import; not the installs, caches or state.
COPIED = (
    *("layers", "functions", "harness", "emulator", "ops", "tests"),
    *("template.yaml", "samconfig.toml", "pyproject.toml"),
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
CONSUMER_TESTS = "tests/unit/fanout/test_callback.py"


def statements_by_name(source: str) -> list[tuple[str, ast.stmt]]:
    named = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            named.append((node.name, node))
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            named.append((node.targets[0].id, node))
        else:
            raise AssertionError(f"a merged block defines names only, not: {ast.unparse(node)}")
    return named


def merged(module: str, block: str) -> str:
    """The module with the block's definitions (see the module's docstring)."""
    lines = module.splitlines()
    existing = {}
    for node in ast.parse(module).body:
        for target in getattr(node, "targets", [node]):
            if isinstance(target, ast.Name | ast.FunctionDef | ast.ClassDef):
                existing[getattr(target, "id", getattr(target, "name", None))] = node
    block_lines = block.splitlines()
    replacements: dict[int, tuple[int, list[str]]] = {}  # first line -> (last line, new text)
    pending: list[str] = []
    for name, node in statements_by_name(block):
        start = (
            node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno
        )
        text = block_lines[start - 1 : node.end_lineno]
        if name not in existing:
            pending += [*text, ""]
            continue
        old = existing[name]
        first = old.decorator_list[0].lineno if getattr(old, "decorator_list", None) else old.lineno
        replacements[first] = (old.end_lineno, [*pending, *text])
        pending = []
    out, number = [], 1
    while number <= len(lines):
        if number in replacements:
            last, text = replacements[number]
            out += text
            number = last + 1
            continue
        out.append(lines[number - 1])
        number += 1
    if pending:
        out += ["", "", *pending]
    return "\n".join(out).rstrip() + "\n"


def in_section(template: str, section: str, entries: str) -> str:
    """template.yaml with YAML entries added at the end of a top-level section."""
    lines = template.splitlines()
    start = lines.index(f"{section}:")
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()),
        len(lines),
    )
    return "\n".join([*lines[:end], "", entries, *lines[end:]]) + "\n"


def build(project: Path, block: Block) -> None:
    how, path = block.walkthrough.split()
    target = project / path
    if how == "write":
        assert not target.exists(), f"{block.name}: {path} exists: the walkthrough adds it"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text + "\n")
    elif how == "merge":
        target.write_text(merged(target.read_text(), block.text))
    else:
        section = {"resources": "Resources", "outputs": "Outputs"}[how]
        target.write_text(in_section(target.read_text(), section, block.text))


def test_the_walkthroughs_consumer_passes_its_tests_in_every_fan_out_mode(tmp_path):
    walkthrough = [block for block in blocks(DOC) if block.walkthrough]
    assert [block.walkthrough.split()[1] for block in walkthrough] == [
        "layers/shared/shared/rules.py",
        "layers/shared/shared/keys.py",
        "layers/shared/shared/notifications.py",
        "functions/callback/app.py",
        "template.yaml",
        "template.yaml",
        "harness/stack.py",
        CONSUMER_TESTS,
    ]
    project = tmp_path / "project"
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=IGNORED)
        else:
            shutil.copy(source, project / name)
    for block in walkthrough:
        build(project, block)

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         CONSUMER_TESTS],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    # each mode's delivery and template pieces, and the changes the filter refuses
    assert re.search(r"\b11 passed\b", run.stdout), run.stdout[-2000:]

    # The template block is SAM the translator takes, as sam build and the local stack do (its
    # conditions stay conditions: one translation serves every mode).
    translated = translate(load_template(project / "template.yaml"), {})["Resources"]
    assert translated["CallbackFunction"]["Type"] == "AWS::Lambda::Function"
    assert translated["CallbackStreamMapping"]["Condition"] == "FanOutByLambda"
    role = translated["CallbackFunctionRole"]["Properties"]
    assert role["ManagedPolicyArns"] == [
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
    ]
    granted = json.dumps(role["Policies"])
    assert (
        '"NotificationQueue", "QueueName"' in granted and '"Sid": "ReadContactsStream"' in granted
    )


def test_the_walkthroughs_filter_is_one_filter_wherever_the_doc_writes_it():
    """Step 3's filter (its JSON block, the patterns its commands test) is the one the template
    block gives CallbackStreamMapping: a reader copies either."""
    doc = blocks(DOC)
    [filter_block] = [block for block in doc if block.language == "json"]
    stated = json.loads(filter_block.text)
    [resources_block] = [b for b in doc if b.walkthrough == "resources template.yaml"]
    mapping = cfn_yaml.loads(resources_block.text)["CallbackStreamMapping"]["Properties"]
    [declared] = mapping["FilterCriteria"]["Filters"]
    assert json.loads(declared["Pattern"]) == stated
    tested = [
        json.loads(pattern)
        for block in doc
        if block.language == "bash"
        for pattern in re.findall(r"PATTERN='(.+?)'", block.text, re.S)
    ]
    assert tested and all(pattern == stated for pattern in tested)


# What is the new consumer's own: its description and the changes it acts on.
OWN_PROPERTIES = ("Description", "FilterCriteria")


def test_the_walkthroughs_template_block_is_surveys_with_the_name_swapped():
    """The doc's resources are SurveyFunction's as template.yaml has them, the name swapped, but
    for what is the consumer's own: a change to every consumer's block (a setting, a grant, an
    alarm's hook) fails this until the walkthrough follows."""
    [block] = [b for b in blocks(DOC) if b.walkthrough == "resources template.yaml"]
    walkthrough = cfn_yaml.loads(block.text)
    template = cfn_yaml.loads((ROOT / "template.yaml").read_text())["Resources"]
    for name, resource in walkthrough.items():
        survey = json.loads(
            json.dumps(template[name.replace("Callback", "Survey")])
            .replace("Survey", "Callback")
            .replace("survey", "callback")
        )
        for declared in (resource, survey):
            for own in OWN_PROPERTIES:
                declared["Properties"].pop(own, None)
        assert json.loads(json.dumps(resource)) == survey, name
