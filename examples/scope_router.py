"""A scope selector plugin: a keyword router that picks one folder of the shipped chunking set from the question.

The shipped chunking set files its four long documents under folders named for their source
(`corpora/chunking_eval/metadata.jsonl`): speeches/, papers/, encyclopedia/ and chats/. This router counts, per
folder, how many of the question's words are among that folder's topic words and chooses the folder with the most;
with no topic word, or a tie, it chooses no scope (the whole corpus is searched). The word lists describe each
source's subject as a person would write them, not the questions: a router like this is the stage that
`scope_miss_rate` audits, and it misses whenever a question names none of its folder's words.

    systems:
      - {name: bm25_routed, adapter: bm25s, scope: {selector: "scope_router:route", folder_mode: on}}

configs name it `module:function`; run with this folder on the path (`PYTHONPATH=examples`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

WORDS = {
    "speeches": "president biden america american americans congress nation administration union address tax taxes "
    "economy inflation democracy ukraine putin senate vote voters jobs workers",
    "papers": "gene genes genetic genome protein proteins cell cells cellular species strain strains mutant mutants "
    "expression pathway signaling molecular dna rna enzyme study studies research clinical patients "
    "plasmodium falciparum drosophila bacteria sequence sequences",
    "encyclopedia": "game games album song single episode film season team league battle war army navy ship ships "
    "battleship regiment history century released chart character characters poet emperor",
    "chats": "theme themes shop store product products collection collections city cities sustainability renewable "
    "energy social media relationships museum london blog essay",
}
TOPICS = {folder: frozenset(words.split()) for folder, words in WORDS.items()}
WORD = re.compile(r"[a-z]+")


def route(text: str, metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The folder whose topic words the question uses most, as a scope filter; None (no scope) without a winner."""
    words = WORD.findall(text.lower())
    hits = {folder: sum(w in topic for w in words) for folder, topic in TOPICS.items()}
    best = max(hits.values())
    winners = [f for f, n in hits.items() if n == best]
    return {"folder": winners[0]} if best > 0 and len(winners) == 1 else None
