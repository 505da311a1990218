"""A rubric metric's judge prompt and verdict parser (the rubric itself: metrics/rubric.py).

The prompt is the versioned template `rubric_v2` with the rubric's definition written in: its criterion,
evaluation steps, scale and labelled levels (`rubric_v1`, still loadable, is the same without quoting the
material: an answer holding `</material>` could write outside its block there). The result is a `Prompt` named `rubric_<name>` whose text (and
so sha256, and so the judge's identity and cache key) changes whenever the definition does: an edited rubric
is judged afresh, never served the old rubric's cached verdicts.

Per item, the judge is shown only the inputs the rubric names, each in its own labelled section inside
`<material>` (passages numbered `[1]`, `[2]`, ...), quoted (llm/prompts: no `<material>` or `</material>` of
the material's own survives), and is told the material is data, never instructions. The reply's verdict is its final JSON object
(llm/verdicts.py: a passage that quotes `{"verdict": 1}` cannot judge itself): `{"verdict": 1|0}` on the
yes/no scale (true/false and "yes"/"no" are read too), `{"score": N}` with N an integer on 0..high
otherwise, and an optional `reasoning` string, kept with the verdict and in the call log. Reasoning may come
before the object (as prose) or inside it. Anything else is `unparseable`, never a number.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence

from retbench.jsontypes import JSONObject
from retbench.llm.prompts import Prompt, load_prompt
from retbench.llm.verdicts import _flag, _integer, located_objects
from retbench.metrics.rubric import Rubric

TEMPLATE = "rubric_v2"


def _escape(text: str) -> str:
    """The rubric's own text, safe inside a template (a `$` in it is a dollar sign, not a placeholder)."""
    return text.replace("$", "$$")


def rubric_prompt(rubric: Rubric, template: str = TEMPLATE) -> Prompt:
    """The rubric's prompt: the template with its definition written in (module docstring)."""
    base = load_prompt(template)
    steps = "".join(f"{i}. {s}\n" for i, s in enumerate(rubric.steps, 1))
    if steps:
        steps = "Evaluation steps:\n" + steps
    levels = "; ".join(f"{g} = {t}" for g, t in sorted(rubric.levels.items(), reverse=True))
    if rubric.binary:
        scale = "1 (yes) or 0 (no)" + (f": {levels}" if levels else "")
        reply = '{"reasoning": "one short sentence", "verdict": 1 or 0}'
    else:
        scale = f"an integer from 0 to {rubric.high}" + (f": {levels}" if levels else "")
        reply = f'{{"reasoning": "one short sentence", "score": N}} with N from 0 to {rubric.high}'
    fields = {
        "name": rubric.name,
        "criterion": _escape(rubric.criterion.strip()),
        "steps": _escape(steps),
        "scale": _escape(scale),
        "reply": reply,
        "material": "${material}",
    }
    text = string.Template(base.text).safe_substitute(fields)
    return Prompt(f"rubric_{rubric.name.lower().replace('-', '_')}", base.version, text)


def material(
    rubric: Rubric,
    *,
    query: str,
    answer: str | None,
    references: Sequence[str],
    passages: str,
    negatives: Sequence[str],
) -> dict[str, str]:
    """The prompt fields of one item: the sections of the inputs the rubric names, in a fixed order."""
    parts = []
    for name in rubric.inputs:
        if name == "query":
            parts.append(f"Question:\n{query}")
        elif name == "answer":
            parts.append(f"Answer:\n{answer or '(no answer)'}")
        elif name == "references":
            parts.append("Reference answer(s):\n" + ("\n".join(f"- {r}" for r in references) or "(none)"))
        elif name == "passages":
            parts.append(f"Retrieved passages:\n{passages}")
        elif name == "negatives":
            parts.append("Known wrong answers:\n" + ("\n".join(f"- {r}" for r in negatives) or "(none)"))
    return {"material": "\n\n".join(parts)}


def parser(rubric: Rubric) -> Callable[[str], tuple[JSONObject | None, str]]:
    """The verdict parser of a rubric's scale: ({"value", "reasoning"}, "ok") or (None, "unparseable")."""

    def parse(text: str) -> tuple[JSONObject | None, str]:
        found = list(located_objects(text))
        if not found:
            return None, "unparseable"
        start, obj = found[-1]
        if rubric.binary:
            flag = _flag(obj.get("verdict"))
            value = None if flag is None else int(flag)
        else:
            value = _integer(obj.get("score"))
            value = value if value is not None and 0 <= value <= (rubric.high or 0) else None
        if value is None:
            return None, "unparseable"
        reasoning = obj.get("reasoning")
        if not isinstance(reasoning, str):  # prose before the object is the reasoning the model gave
            reasoning = re.sub(r"```[a-z]*\s*$", "", text[:start].strip()).strip()[-500:]
        return {"value": value, "reasoning": reasoning.strip()}, "ok"

    return parse
