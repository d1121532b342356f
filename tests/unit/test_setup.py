"""`make setup` as the README uses it: the project's uv, one pinned version wherever it is
installed, in .tools/bin, where the README's PATH line finds it in a new shell (the README's next
command after `make run` is a `uv run`)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
[UV_VERSION] = re.findall(r"^UV_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
PATH_LINE = 'export PATH="$PWD/.tools/bin:$PATH"'
INSTALLERS = [
    ROOT / "Makefile",
    ROOT / ".ci" / "run",
    ROOT / "README.md",
    ROOT / "pipeline" / "uv.txt",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / ".github" / "workflows").glob("*.yaml")),
]


def test_one_uv_version_wherever_uv_is_installed():
    pins = {
        f"{path.relative_to(ROOT)}: uv=={version}"
        for path in INSTALLERS
        for version in re.findall(r"\buv==([^\s`\\\"]+)", path.read_text())
    }
    assert pins, "no uv pin found: is the pattern broken?"
    versions = {pin.rsplit("==", 1)[1] for pin in pins} - {"$(UV_VERSION)"}  # the pin itself
    assert versions == {UV_VERSION}, sorted(pins)
    unpinned = [
        p.name for p in INSTALLERS if re.search(r"pip install (--\S+ )*uv\b(?!==)", p.read_text())
    ]
    assert not unpinned, unpinned


def test_make_setup_puts_the_pinned_uv_where_the_readmes_path_line_finds_it():
    readme = (ROOT / "README.md").read_text()
    assert PATH_LINE in readme
    assert readme.index(PATH_LINE) < readme.index("uv run "), "the PATH line comes too late"
    done = subprocess.run(
        [ROOT / ".tools" / "bin" / "uv", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert done.stdout.split()[:2] == ["uv", UV_VERSION]
