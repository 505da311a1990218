"""What a fresh interpreter has imported after running some code: the start-up guards' one probe.

The test process itself has imported nearly everything, so the probe runs in a subprocess (the same
interpreter and PYTHONPATH) and reads `sys.modules` there once the code has run, a command's exit
included (`SystemExit` is caught, its code kept).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_PROBE = """
import json, sys
code = 0
try:
    exec(compile({code!r}, "<probe>", "exec"), {{"__name__": "__probe__"}})
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
with open({out!r}, "w") as fh:
    json.dump({{"modules": sorted(sys.modules), "exit": code}}, fh)
"""


@dataclass
class Probe:
    modules: set[str]
    exit_code: int
    stdout: str
    stderr: str

    def loaded(self, names: set[str] | list[str]) -> list[str]:
        """Which of `names` (a module, or a package: any module under it counts) were imported."""
        return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in self.modules))


def modules_after(code: str, tmp_path: Path, env: dict[str, str] | None = None) -> Probe:
    """Run `code` in a fresh interpreter; the modules it left imported, its exit code and its output."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code, out=str(out))],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.exists(), done.stderr[-2000:]
    record = json.loads(out.read_text())
    return Probe(set(record["modules"]), record["exit"], done.stdout, done.stderr)


def cli_modules(args: list[str], tmp_path: Path) -> Probe:
    """`retbench ARGS` as the console script runs it (`retbench.cli.main`), and what it imported."""
    return modules_after(
        f"import sys\nsys.argv = ['retbench', *{args!r}]\nfrom retbench.cli import main\nmain()", tmp_path
    )
