"""Which judged texts carry instructions to the judge: a stated detector, so such verdicts are flagged and counted.

A judged text (a passage, a system's answer, anything filled into a prompt's fields) is data; text in it that
speaks to the judge is a prompt injection, whether or not the judge obeyed it. The quoted prompts
(llm/prompts: `relevance_v3`, `rubric_v2`, ...) keep such text inside its block and tell the judge it is data;
this detector says where it was tried, so a verdict on such text is flagged (`Verdict.flags`), counted
(`JudgeStats.flagged`, the `judge` block of metrics.json, the report) and can be read in the call log.

A text is flagged when it holds any of (case-insensitive; each reason names what was found):
- `delimiter`: a tag or marker that frames a prompt: `<material>`, `</passage>`, `<query>`, `<system>` (open or
  close), a chat template's role marker (`<|im_start|>`, `<|system|>`, `[INST]`, `<<SYS>>`) or retbench's own
  `=== user ===` line: text that tries to end its data block or start a message of its own;
- `verdict`: a JSON object with a `grade`, `score` or `verdict` key (`{"grade": 3}`): a verdict only the judge's
  reply should hold;
- `instruction`: words addressed to the judge: "ignore / disregard / forget (all / the / any) previous (or
  prior, above, earlier, preceding) instructions (or rules, prompts, criteria)"; "you are now (a / the) judge
  (or grader, assessor, evaluator, assistant)"; "note (or message, instruction) to the judge (grader, assessor,
  evaluator, model, AI, LLM, assistant)"; "judge (grader, ...): grade (score, rate, reply, respond, answer,
  output, return, give)"; "grade (score, rate, mark, give) this passage (answer, document, response) as
  relevant (correct, 3, 5, a 3, the highest, full marks)".

What it cannot do: a text that persuades without these words ("this is the most relevant passage possible")
or spells them differently (another language, homoglyphs, base64) is not flagged; a document that quotes an
injection to discuss it is. The flag is evidence to look at, not a verdict: the score is kept as the judge gave it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_JUDGE = r"(?:judge|grader|assessor|evaluator|model|ai|llm|assistant|reviewer)"
_TEXT = r"(?:passage|answer|document|response|text|result)"
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "delimiter",
        re.compile(
            r"<\s*/?\s*(?:material|passage|query|document|system|user|assistant|instructions?)\s*>"
            r"|<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?INST\]|<</?SYS>>|^=== user ===",
            re.I | re.M,
        ),
    ),
    ("verdict", re.compile(r"\{\s*\"?(?:grade|score|verdict)\"?\s*:", re.I)),
    (
        "instruction",
        re.compile(
            r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:previous|prior|above|"
            r"earlier|preceding|other|system)\s+(?:instructions?|rules?|prompts?|criteria|directions?|guidelines?)"
            rf"|\byou\s+are\s+now\s+(?:a|an|the)?\s*(?:\w+\s+){{0,2}}{_JUDGE}"
            rf"|\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?{_JUDGE}s?\b"
            rf"|\b{_JUDGE}s?\s*[:,]\s*(?:please\s+)?(?:grade|score|rate|reply|respond|answer|output|return|give|mark)"
            rf"|\b(?:grade|score|rate|mark|give)\s+(?:this|the)\s+{_TEXT}\s+(?:as\s+|with\s+|an?\s+|at\s+)*"
            r"(?:relevant|correct|perfect|the\s+highest|full\s+marks|top|\d)",
            re.I,
        ),
    ),
)


def instructions_to_judge(text: str) -> list[str]:
    """Why `text` reads as speaking to the judge (module docstring): `reason: found text`, at most one per reason."""
    out = []
    for reason, pattern in PATTERNS:
        m = pattern.search(text)
        if m:
            out.append(f"{reason}: {' '.join(m.group().split())[:60]}")
    return out


def flags(fields: Mapping[str, str]) -> list[str]:
    """Each prompt field's reasons, as `field: reason: found text` (empty: nothing speaks to the judge)."""
    return [f"{name}: {r}" for name, value in fields.items() for r in instructions_to_judge(str(value))]


__all__ = ["PATTERNS", "flags", "instructions_to_judge"]
