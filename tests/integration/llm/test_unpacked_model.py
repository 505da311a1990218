"""scripts/unpack_gguf.py and the choice of what the session's judge server loads.

The folder the script makes is served in place of the GGUF only when it records that GGUF's sha256; a file whose
sha256 is not the one given is never unpacked. (The script itself checks every tensor of a folder it writes against
the GGUF's when setup runs it.)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

from local_model import UNPACKED, servable_model
from repo_paths import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("unpack_gguf", ROOT / "scripts" / "unpack_gguf.py")
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(ROOT / "scripts"))  # it imports assemble_model from beside itself, as `python scripts/...`
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def _model(tmp_path: Path) -> tuple[Path, str]:
    model = tmp_path / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF not really a model")
    return model, hashlib.sha256(model.read_bytes()).hexdigest()


def test_the_unpacked_folder_is_served_only_when_it_was_made_from_this_gguf(tmp_path):
    model, digest = _model(tmp_path)
    assert servable_model(model) == model  # no folder: the GGUF itself
    folder = model.with_name(UNPACKED)
    folder.mkdir()
    assert servable_model(model) == model  # an unfinished folder (no source.json)
    (folder / "source.json").write_text(json.dumps({"sha256": "0" * 64}))
    assert servable_model(model) == model  # made from another file
    (folder / "source.json").write_text(json.dumps({"sha256": digest}))
    assert servable_model(model) == folder


def test_unpack_refuses_a_file_whose_sha256_is_not_the_recorded_one_and_writes_nothing(tmp_path, capsys):
    model, digest = _model(tmp_path)
    out = model.with_name(UNPACKED)
    assert _script().main(str(model), str(out), "f" * 64) == 1
    assert "not sha256" in capsys.readouterr().err
    assert not out.exists() and not out.with_name(out.name + ".part").exists()
    out.mkdir()
    (out / "source.json").write_text(json.dumps({"sha256": digest}))
    assert _script().main(str(model), str(out), digest) == 0  # already made from this file: kept as it is
    assert "present" in capsys.readouterr().out
