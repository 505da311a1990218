"""Builds corpora/rag/ (corpus.jsonl, golden.yaml) from the shipped chunking set; see README.md here.

Run from the repository root: `python corpora/rag/build.py`. The output is committed; this script is
the recipe, and it checks every reference answer is a verbatim piece of its question's gold excerpt.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from retbench.chunkers import Recursive

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "chunking_eval"
DOC = "state_of_the_union"

# question id -> a short reference answer cut verbatim from the question's gold excerpt
# (the whole excerpt is the second reference answer)
ANSWERS = {
    "q2": "Over 100 million",
    "q3": "Ukraine",
    "q5": "ARPA-H",
    "q8": "at age 29",
    "q11": "Fifteen million new jobs",
    "q12": "the smallest it’s been in 20 years",
    "q13": "John Lewis",
    "q14": "six to eight years",
    "q15": "another trillion dollars",
    "q19": "World War Two",
    "q21": "being used to beat cancer",
    "q22": "at least 21 percent",
    "q23": "Eight hundred thousand new manufacturing jobs",
    "q26": "Evan and Paul",
    "q27": "Dr. King and Bobby Kennedy",
    "q41": "$500 billion over the next 10 years",
    "q43": "the first-ever Office of Gun Violence Prevention",
    "q47": "$35 a month",
    "q49": "the PACT Act",
    "q52": "high-quality tutoring and summer learning",
    "q56": "we won in 2022 and 2023",
    "q70": "the Voting Rights Act",
}
# known-wrong answers (negative references) for a few questions
NEGATIVE = {"q3": ["Poland"], "q22": ["15 percent"], "q47": ["$15 a month"]}
# questions the speech does not answer (each checked: its key term is absent from the document)
UNANSWERABLE = [
    ("u1", "Which city did President Biden say will host the next Olympic Games?", "Olympic"),
    ("u2", "What is the name of President Biden's dog mentioned in the speech?", " dog"),
    ("u3", "How much funding did President Biden announce for high-speed rail to San Francisco?", " rail"),
    ("u4", "What did President Biden say about regulating cryptocurrency exchanges?", "crypto"),
    ("u5", "When does President Biden plan to send astronauts to Mars?", "Mars"),
    ("u6", "What did President Biden say about banning TikTok?", "TikTok"),
]


def main() -> None:
    text = (SOURCE / "corpora" / f"{DOC}.md").read_text(encoding="utf-8")
    chunks = Recursive(size=600).chunk("sotu", text)
    corpus = [{"_id": f"sotu-{i:03d}", "title": "", "text": c.text} for i, c in enumerate(chunks)]
    spans = [(f"sotu-{i:03d}", c.start, c.end) for i, c in enumerate(chunks)]
    questions = {q["id"]: q for q in map(json.loads, (SOURCE / "questions.jsonl").read_text().splitlines())}
    samples = []
    for qid, short in ANSWERS.items():
        q = questions[qid]
        assert q["corpus_id"] == DOC and len(q["references"]) == 1, qid
        ref = q["references"][0]
        assert short in ref["content"], (qid, short)
        gold = [d for d, a, b in spans if min(b, ref["end_index"]) - max(a, ref["start_index"]) > 0]
        meta = {"answer": [short, ref["content"].strip()], "source": f"chunking_eval {qid}"}
        if qid in NEGATIVE:
            meta["negative_answers"] = NEGATIVE[qid]
        samples.append(
            {"id": qid, "input": q["question"], "expected_output": gold, "tags": ["answerable"], "metadata": meta}
        )
    for uid, question, term in UNANSWERABLE:
        assert term.lower() not in text.lower(), term
        samples.append({"id": uid, "input": question, "answerable": False, "tags": ["unanswerable"]})
    with open(HERE / "corpus.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus)
    header = "# Built by corpora/rag/build.py from the chunking set (see README.md here); do not edit by hand.\n"
    body = yaml.safe_dump({"samples": samples}, allow_unicode=True, sort_keys=False, width=110)
    (HERE / "golden.yaml").write_text(header + body, encoding="utf-8")
    print(f"{len(corpus)} passages, {len(samples)} samples ({len(UNANSWERABLE)} unanswerable)")


if __name__ == "__main__":
    main()
