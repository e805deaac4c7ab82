"""Every Python example of docs/python.md runs, in order, in one namespace."""

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_the_python_page_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 5
    namespace = {"root": str(tmp_path / "lake")}
    for block in blocks:
        if "import datafusion" in block:
            pytest.importorskip("datafusion")
        exec(compile(block, str(DOC), "exec"), namespace)
