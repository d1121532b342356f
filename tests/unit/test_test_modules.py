"""Tests never import another test module or a conftest as a module (docs/architecture.md): what
tests share lives in a support module (tests/unit/support.py, tests/unit/<package>/support.py),
fixtures in a conftest that pytest loads itself. An import of a test module runs its tests'
module twice under two names and ties one test file's edits to another's."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _is_test_module(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return dotted.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def imported_modules(path: Path, root: Path = ROOT) -> list[str]:
    """Every module ``path`` imports, by its dotted name (a name taken from a package is counted
    as the module it may be: `from tests.unit import test_x`)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    modules = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            modules.append(base)
            modules.extend(f"{base}.{alias.name}" for alias in node.names)
    return modules


def test_no_test_imports_a_test_module_or_a_conftest():
    found = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for module in imported_modules(path)
        if _is_test_module(module)
    ]
    assert found == []


def test_the_check_sees_each_form_of_such_an_import(tmp_path):
    package = tmp_path / "tests" / "unit" / "ops"
    package.mkdir(parents=True)
    probe = package / "test_probe.py"
    probe.write_text(
        "import tests.unit.test_template\n"
        "from tests.unit.ops.conftest import args\n"
        "from tests.unit.fanout import test_router\n"
        "from .test_files import HELPER\n"
        "from tests.unit.ops.support import args as fine\n"
    )
    flagged = [m for m in imported_modules(probe, tmp_path) if _is_test_module(m)]
    assert flagged == [
        "tests.unit.test_template",
        "tests.unit.ops.conftest",
        "tests.unit.fanout.test_router",
        "tests.unit.ops.test_files",
    ]
