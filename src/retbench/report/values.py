"""The document-values report (report.md): documents ranked by value, the harmful ones and what they hurt,
value by group, near-duplicate groups and leaks. The study computes a `ValuesResult` (`retbench.results.values`);
this module only formats one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retbench.report import fmt
from retbench.report.markdown import md_table, md_text
from retbench.results.values import (
    DocumentValue,
    GroupValue,
    HarmfulDocument,
    Leaks,
    NearDuplicates,
    ValuesResult,
    ValuesSummary,
)

_UTILITY = {
    "precision": "the share of the top {k} that is relevant (precision@{k}, trec_eval's P@{k})",
    "recall": "the share of a query's relevant documents found in the top {k} (recall@{k})",
    "ndcg": "nDCG@{k} with linear gains",
}


def _method(summary: ValuesSummary) -> str:
    if summary.method == "exact":
        return (
            "exact KNN-Shapley values (Jia et al., VLDB 2019: the recursion over documents sorted by score), "
            "for flat inner-product retrieval"
        )
    mc = summary.monte_carlo
    return (
        f"a Monte-Carlo permutation estimate ({mc and mc.permutations} permutations, seed {mc and mc.seed}) over "
        "the retriever's full-corpus ranking (a coalition's ranking is that ranking without the other documents); "
        "± is one standard error"
    )


def _headline(name: str, s: ValuesSummary) -> list[str]:
    kind = s.utility.split("@")[0]
    lines = [
        f"# Document values: {md_text(name)}",
        "",
        f"A document's value is its Shapley share of {_UTILITY.get(kind, s.utility).format(k=s.k)}, "
        f"averaged over {s.queries} queries with a relevant document ({s.queries_skipped_no_relevant} "
        f"without one skipped); method: {_method(s)}.",
        "",
        f"- {s.utility} of the whole corpus: **{fmt.num(s.utility_of_corpus)}**; the values sum to "
        f"{fmt.num(s.sum_of_values)} (Shapley values add up to the utility of the whole corpus)",
        f"- {s.documents} documents: {s.positive} help, {s.zero} do nothing, **{s.negative} hurt** "
        "(negative value: they rank above relevant documents that miss the top k)",
        f"- leave-one-out (U(all) - U(all without d)) is non-zero for {s.leave_one_out_nonzero} documents: "
        "removing one document rarely changes anything when another can take its place, which Shapley counts",
    ]
    if s.leaks.queries:
        lines.append(
            f"- **leaks: {s.leaks.queries} of {s.queries} queries** are in the corpus or the query file twice "
            "(see Leaks): every number above includes them"
        )
    check = s.monte_carlo_check
    if check:
        lines.append(
            f"- Monte-Carlo check ({check.permutations} permutations, seed {check.seed}): correlation "
            f"{fmt.num(check.correlation, 4)} with exact; of the {check.documents_with_spread} documents whose "
            f"estimate varied, {fmt.pct(check.within_4_stderr)} within 4 standard errors of exact; for the others "
            "(the same contribution in every permutation: standard error 0) the largest difference is "
            f"{fmt.num(check.max_abs_difference_without_spread, 6)}"
        )
    return lines


def _value(row: DocumentValue) -> str:
    v = fmt.signed(row.value, 6)
    return f"{v} ± {fmt.num(row.stderr, 6)}" if row.stderr is not None else v


def _ranked(rows: Sequence[DocumentValue]) -> str:
    header = ["#", "document", "title", "value", "leave-one-out", "relevant for", "near-dup group"]
    return md_table(
        header,
        [
            [
                r.rank,
                md_text(r.doc_id),
                md_text(r.title),
                _value(r),
                fmt.signed(r.leave_one_out, 6),
                r.relevant_for,
                "–" if r.near_duplicate_group is None else r.near_duplicate_group,
            ]
            for r in rows
        ],
    )


def _harmful(harm: Sequence[HarmfulDocument]) -> list[str]:
    out = [
        "## Harmful documents",
        "",
        "Each charges the queries where it ranks above a relevant document that is below the top k (displaced: "
        "the relevant document and its position in the whole ranking).",
        "",
    ]
    rows = []
    for h in harm:
        for n, q in enumerate(h.queries_hurt):
            displaced = ", ".join(f"{md_text(x.doc_id)} (#{x.position})" for x in q.displaced) or "–"
            rows.append(
                [
                    md_text(h.doc_id) if n == 0 else "",
                    fmt.signed(h.value, 6) if n == 0 else "",
                    f"{h.queries_hurt_total}" if n == 0 else "",
                    f"{md_text(q.query_id)}: {md_text(q.query[:80])}",
                    displaced,
                ]
            )
    if not rows:
        return [*out, "No document has a negative value."]
    return [*out, md_table(["document", "value", "queries hurt", "query", "displaced"], rows)]


def _groups(groups: Mapping[str, Sequence[GroupValue]], top: int) -> list[str]:
    out = ["## Value by group", ""]
    for field, rows in groups.items():
        out += [
            f"By {md_text(field)}:",
            "",
            md_table(
                ["group", "documents", "value", "mean", "harmful"],
                [
                    [md_text(r.group), r.documents, fmt.signed(r.value, 4), fmt.signed(r.mean, 6), r.harmful]
                    for r in rows[:top]
                ],
            ),
            "",
        ]
    return out


def _near_duplicates(nd: NearDuplicates) -> list[str]:
    out = [
        "## Near-duplicate groups",
        "",
        f"Documents linked by embedding cosine >= {nd.threshold} (novelty <= {fmt.num(1 - nd.threshold, 2)}), "
        "grouped by linkage.",
        "",
    ]
    if not nd.checked:
        return [*out, "Not checked: the corpus is too large for the all-pairs comparison."]
    out.append(f"{nd.groups} groups holding {nd.documents} documents.")
    if nd.largest:
        out += [
            "",
            md_table(
                ["group", "size", "summed value", "documents"],
                [
                    [g.group, g.size, fmt.signed(g.value, 6), ", ".join(md_text(x) for x in g.doc_ids)]
                    for g in nd.largest
                ],
            ),
        ]
    return out


def _leaks(leaks: Leaks) -> list[str]:
    out = [
        "## Leaks",
        "",
        "A query leaks when its text (case-folded, whitespace runs made one space) occurs in a document, when a "
        f"document's embedding has cosine >= {leaks.threshold} with the query's, or when another query of the "
        "same query file has the same text.",
        "",
        f"- text found in a document: {leaks.text_in_corpus}",
        f"- a document within cosine {leaks.threshold}: {leaks.embedding_near}",
        f"- same text as another query: {leaks.same_text_as_another_query}",
    ]
    if leaks.leaked:
        out += [
            "",
            md_table(
                ["query", "text in", "embedding near", "same text as"],
                [
                    [
                        f"{md_text(x.query_id)}: {md_text(x.query[:80])}",
                        ", ".join(md_text(d) for d in x.text_in) or "–",
                        ", ".join(md_text(d) for d in x.embedding_near) or "–",
                        ", ".join(md_text(d) for d in x.same_text_as_queries) or "–",
                    ]
                    for x in leaks.leaked
                ],
            ),
        ]
    return out


def render_values_report(result: ValuesResult) -> str:
    """report.md of a document-values study."""
    summary, documents, top = result.summary, result.documents, result.top
    lines = _headline(result.name, summary)
    lines += ["", f"## Most valuable documents (top {min(top, len(documents))})", "", _ranked(documents[:top])]
    lowest = [r for r in documents if r.value < 0][-top:][::-1]
    if lowest:
        lines += ["", f"## Lowest values (bottom {len(lowest)})", "", _ranked(lowest)]
    lines += [
        "",
        *_harmful(summary.harmful),
        "",
        *_groups(summary.groups, top),
        *_near_duplicates(summary.near_duplicates),
    ]
    lines += ["", *_leaks(summary.leaks), ""]
    return "\n".join(lines)
