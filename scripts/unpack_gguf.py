"""Dequantize a GGUF model once into a float32 safetensors folder that `transformers serve` loads in seconds.

    python scripts/unpack_gguf.py MODEL.gguf OUTPUT_DIR SHA256

`transformers serve` given a GGUF file dequantizes every tensor and rebuilds the tokenizer from the file's
metadata each time it starts (over a minute on a 2-core machine); given this folder it reads the same float32
tensors back (a few seconds). The folder holds exactly what transformers makes of the GGUF: the script reloads
what it wrote and checks every tensor bit for bit and the tokenizer's chat prompt token for token against the
GGUF's, and records the GGUF's sha256 in `source.json`. An existing folder recorded for SHA256 is kept.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from assemble_model import sha256

SOURCE = "source.json"
_PROBE = [{"role": "system", "content": "Answer yes or no."}, {"role": "user", "content": "Is Paris in France?"}]


def recorded_sha256(folder: Path) -> str | None:
    """The GGUF sha256 a finished folder was made from (None when the folder is absent or unfinished)."""
    try:
        return str(json.loads((folder / SOURCE).read_text())["sha256"])
    except (OSError, ValueError, KeyError):
        return None


def main(gguf: str, output: str, expected: str) -> int:
    model_file, out = Path(gguf), Path(output)
    if recorded_sha256(out) == expected:
        print(f"{out}: present, made from sha256 {expected[:12]}")
        return 0
    if not model_file.is_file() or sha256(model_file) != expected:
        print(f"{model_file}: missing or not sha256 {expected}; not unpacked", file=sys.stderr)
        return 1
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_file.parent, gguf_file=model_file.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_file.parent, gguf_file=model_file.name)
    # the tensors are plain float32 now; the GGUF quantizer object only refuses to save them
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    again = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).state_dict()
    tokens = AutoTokenizer.from_pretrained(tmp).apply_chat_template(_PROBE, add_generation_prompt=True)
    wanted = model.state_dict()
    same = wanted.keys() == again.keys() and all(torch.equal(wanted[k], again[k]) for k in wanted)
    if not same or tokens != tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True):
        shutil.rmtree(tmp)
        print(f"{out}: the saved folder does not reload as {model_file.name}; not used", file=sys.stderr)
        return 1
    (tmp / SOURCE).write_text(json.dumps({"gguf": model_file.name, "sha256": expected, "dtype": "float32"}) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    print(f"{out}: unpacked from {model_file.name}, every tensor checked")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
