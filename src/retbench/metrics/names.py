"""Metric names the way users already write them: ir_measures' syntax and trec_eval 10.0's rbp names.

The registry parses `name(params)@k` and `name@k(params)` itself, so most ir_measures names need nothing
here: `nDCG@10`, `P(rel=2)@5`, `AP`, `RR`, `R@100`, `Success@10`, `Judged@10`, `ERR@20`, `RBP(p=0.8,rel=1)`,
`alpha_nDCG(alpha=0.5)@20`, `ERR_IA@20`, `NRBP`, `P_IA@10`, `StRecall@10`, `INST(T=2,max_rel=3)`,
`BPM(T=1,max_rel=3)@10`, `SDCG(max_rel=3)@10`, `NERR8(max_rel=3)@10`, `NERR10(p=0.8,max_rel=3)`, `nERR_IA@20`,
`alpha_DCG@20`, `nNRBP`, `AP_IA` are registry names or aliases. `rewrite` turns the rest into
names the registry reads, before it parses them:

- ir_measures' text-valued parameters: `nDCG(dcg='exp-log2')@k` is gdeval's nDCG, `ndcg_exp@k`;
  `dcg='log2'` (SDCG's only choice) and `judged_only=False` (the default) are dropped;
- ir_measures' `RBP` defaults to p = 0.8 where trec_eval's `rbp` defaults to p = 0.9: `RBP` spelled in
  capitals without `p=` gets p = 0.8, the lower-case trec_eval name keeps 0.9;
- trec_eval 10.0's parameter forms `rbp.p=0.8` and `rbp_resid.p=0.8` (and the names it prints for them,
  `rbp_p=0.8`, `rbp_resid_p=0.8`) become `rbp(p=0.8)` and `rbp_resid(p=0.8)`;
- ir_measures names of trec_eval measures become trec_eval's names (`Bpref` -> `bpref`, `IPrec@0.1` ->
  `iprec_at_recall_0.10`, `IPrec(rel=2)@0.4` and `IPrec(rel=2,recall=0.4)` -> `iprec_at_recall(recall=0.4,rel=2)`,
  `NumRet(rel=2)` -> `num_rel_ret(rel=2)`, `SetP(rel=2)` -> `set_P(rel=2)`, `SetF(beta=0.5)` -> `set_F(beta=0.5)`);
- ir_measures' `cutoff=N` parameter is `@N` (a cutoff after `@` wins, as in ir_measures), and its
  `nDCG(gains={0:1,1:2})` is trec_eval's gain map `ndcg.0=1,1=2` (ir_measures gives each judged grade its gain
  before trec_eval's nDCG); `judged_only=True` is refused with a pointer to `-J`, which applies to every measure;
- the C/W/L measures need `max_rel`, the top of the qrels' grade scale (ir_measures requires it too): a name
  without it is refused here, before any work is done.
"""

from __future__ import annotations

import re

from retbench.errors import ConfigError

_TREC_RBP = re.compile(r"^(rbp|rbp_resid)[._]p=(\d*\.?\d+)$")
_IPREC = re.compile(r"^IPrec(?:\((?P<params>[^()]*)\))?(?:@(?P<recall>\d*\.?\d+))?$")
_GAINS = re.compile(r",?\s*gains=\{([^}]*)\}")
_NAME = re.compile(r"^(?P<name>[A-Za-z][\w\-]*?)(?:\((?P<params>[^()]*)\))?(?P<rest>(?:@\d+)?(?:\([^()]*\))?)$")
#: ir_measures names of trec_eval measures -> trec_eval's names (only where the two spell them differently)
IR_MEASURES_TREC = {
    "Bpref": "bpref",
    "NumQ": "num_q",
    "NumRet": "num_ret",
    "NumRel": "num_rel",
    "NumRelRet": "num_rel_ret",
    "SetP": "set_P",
    "SetR": "set_recall",
    "SetF": "set_F",
    "SetAP": "set_map",
    "SetRelP": "set_relative_P",
}
_CWL = {"inst", "insq", "bpm", "sdcg", "nerr8", "nerr9", "nerr10", "nerr11"}
_DROPPED = {("dcg", "log2"), ("judged_only", "false")}


def _text_params(params: str) -> tuple[list[str], dict[str, str]]:
    """Split `a=1,dcg='exp-log2'` into the numeric parts (kept as written) and the text-valued ones."""
    numeric: list[str] = []
    text: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in params.split(","))):
        key, _, value = part.partition("=")
        value = value.strip().strip("'\"")
        try:
            float(value)
            numeric.append(part)
        except ValueError:
            text[key.strip()] = value
    return numeric, text


def _gains(spec: str) -> str:
    """ir_measures' `nDCG(gains={0:1,1:2})` -> trec_eval's gain map `ndcg.0=1,1=2` (metrics/trec_params.py): the
    same measure, as ir_measures computes it by giving each judged grade its gain."""
    m = _GAINS.search(spec)
    if not m:
        return spec
    name = spec.split("(", 1)[0]
    others = [p for p in _GAINS.sub("", spec[len(name) + 1 :].rsplit(")", 1)[0]).split(",") if p.strip()]
    if name.lower() != "ndcg" or others or "@" in spec:
        raise ConfigError(
            f"metric {spec!r}: gains are taken by uncut nDCG only (trec_eval's ndcg.LEVEL=GAIN), e.g. "
            "nDCG(gains={0:0,1:1,2:3})",
            field="metric",
        )
    pairs = [p.split(":") for p in m[1].replace(" ", "").split(",") if p]
    return "ndcg." + ",".join(f"{lv}={g}" for lv, g in pairs)


def _cutoff(params: str, rest: str) -> tuple[str, str]:
    """ir_measures' `cutoff=N` parameter is `@N`; a cutoff given after `@` wins, as in ir_measures."""
    parts = [p for p in params.split(",") if p.strip()]
    cut = [p for p in parts if p.split("=")[0].strip() == "cutoff"]
    if not cut:
        return params, rest
    value = cut[-1].split("=", 1)[1].strip()
    rest = rest if rest.startswith("@") else f"@{value}{rest}"
    return ",".join(p for p in parts if p not in cut), rest


def rewrite(spec: str) -> str:
    """`spec` in a spelling the registry reads (see the module docstring); other names are returned as they are."""
    m = _TREC_RBP.match(spec)
    if m:
        return f"{m[1]}(p={m[2]})"
    spec = _gains(spec)
    m = _IPREC.match(spec)
    if m:
        named = dict(p.split("=", 1) for p in (m["params"] or "").split(",") if "=" in p)
        typed = named.pop("recall", None)
        recall = m["recall"] or typed  # a level after `@` wins, as in ir_measures
        if recall is None:
            raise ConfigError(f"metric {spec!r}: IPrec needs a recall level, e.g. IPrec@0.2", field="metric")
        if not named:
            return f"iprec_at_recall_{float(recall):.2f}"
        return f"iprec_at_recall(recall={float(recall):g},{','.join(f'{k}={v}' for k, v in named.items())})"
    m = _NAME.match(spec)
    if not m:
        return spec
    name, params, rest = m["name"], m["params"] or "", m["rest"]
    params, rest = _cutoff(params, rest)
    numeric, text = _text_params(params)
    for key, value in list(text.items()):
        if (key, value.lower()) in _DROPPED:
            del text[key]
    if text.pop("dcg", None) == "exp-log2" and name.lower() == "ndcg":
        name = "ndcg_exp"
    if text.get("judged_only", "").lower() == "true":
        raise ConfigError(
            f"metric {spec!r}: judged_only=True applies to the whole evaluation here: give -J/--judged-only "
            "(judged_only=True in evaluate) and the name without it",
            field="metric",
        )
    if text:  # left for the registry, which names the parameter it cannot read
        return spec
    if name == "NumRet" and any(p.split("=")[0].strip() == "rel" for p in numeric):
        name, numeric = "num_rel_ret", [p for p in numeric if p.replace(" ", "") != "rel=1"]
    name = IR_MEASURES_TREC.get(name, name)
    if name == "RBP" and not any(p.split("=")[0].strip() == "p" for p in numeric):
        numeric.append("p=0.8")
    given = numeric + [p.strip() for p in re.sub(r"^@\d+", "", rest).strip("()").split(",")]
    if name.lower() in _CWL and not any(p.split("=")[0].strip() == "max_rel" for p in given):
        raise ConfigError(
            f"metric {spec!r}: {name} needs max_rel, the top grade of the qrels' scale (as ir_measures asks), "
            f"e.g. {name}(max_rel=3){'@10' if name.lower() in ('bpm', 'sdcg', 'nerr8', 'nerr9') else ''}",
            field="metric",
        )
    return name + (f"({','.join(numeric)})" if numeric else "") + rest


#: `name(params)@k(params)`: a metric spec's parts (name, parameters before or after the cutoff, the cutoff)
SPEC = re.compile(r"^(?P<name>[A-Za-z][\w\-]*?)(?:\((?P<p1>[^()]*)\))?(?:@(?P<k>\d+))?(?:\((?P<p2>[^()]*)\))?$")


def number(v: float) -> str:
    """A parameter as a spec prints it: 2.0 -> '2', 0.8 -> '0.8'."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def parse_params(text: str | None, spec: str) -> dict[str, float]:
    """`p=0.8,rel=2` -> {"p": 0.8, "rel": 2.0}; anything but name=number is a ConfigError naming the spec."""
    out: dict[str, float] = {}
    if not text:
        return out
    for part in text.split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        try:
            if not eq:
                raise ValueError
            out[key] = float(value)
        except ValueError:
            raise ConfigError(
                f"metric {spec!r}: parameter {part.strip()!r} must be name=number", field="metric"
            ) from None
    return out
