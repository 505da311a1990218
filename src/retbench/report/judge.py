"""Plain-text lines for judge commands: the dry-run estimate, the cost summary, "judged N of M"; and, for the
results report, what keyed each system's judge cache and how many of its verdicts were flagged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from retbench.report.fmt import num, pct
from retbench.results.calibration import Agreement, CalibrationResult, Interval, RubricCalibrationResult


def judged_line(statuses: Mapping[str, int]) -> str:
    """'judged 18 of 20 (1 unparseable, 1 judge_timeout)': failures are counted, never scored."""
    total = sum(statuses.values())
    ok = statuses.get("ok", 0)
    rest = ", ".join(f"{c} {s}" for s, c in sorted(statuses.items()) if s != "ok" and c)
    return f"judged {ok} of {total}" + (f" ({rest})" if rest else "")


def estimate_line(est: Mapping[str, Any]) -> str:
    """The dry run, printed before any call is made."""
    return (
        f"judge plan: {est['items']} verdicts, {est['cached']} cached, {est['calls']} calls to make; "
        f"~{est['input_tokens']} input tokens (estimated), at most {est['output_tokens_max']} output tokens; "
        f"cost at most {est['cost_max']:.4f}"
    )


def stats_line(stats: Mapping[str, Any]) -> str:
    """What the command spent: calls made (cache hits are free), tokens, retries, cost."""
    est = " (estimated: the server reports no usage)" if stats.get("tokens_estimated") else ""
    return (
        f"judge calls made: {stats['calls']} ({stats['cached']} answered from cache), "
        f"tokens in/out: {stats['input_tokens']}/{stats['output_tokens']}{est}, retries: {stats['retries']}, "
        f"cost: {stats['cost']:.4f}" + (f"; {flagged_text(stats['flagged'])}" if stats.get("flagged") else "")
    )


def flagged_text(n: int) -> str:
    """The count of flagged verdicts, saying what the flag means (llm/injection.py)."""
    return (
        f"{n} verdict{'s' if n != 1 else ''} flagged: the judged text carries instructions to the judge "
        "(prompt injection: the scores are kept as judged; the flags in judge_calls.jsonl say what was found)"
    )


def judge_notes(systems: Iterable[Any]) -> list[tuple[str, str]]:
    """(system name, note) for each system whose `judge` block (metrics.json) records what keyed its judge
    cache or flagged verdicts; plain text, escaped by the renderer."""
    out = []
    for s in systems:
        block = s.judge if isinstance(s.judge, Mapping) else {}
        keyed, flagged = block.get("keyed_on") or [], int(block.get("flagged") or 0)
        parts = ([f"judge cache keyed on {'; '.join(map(str, keyed))}"] if keyed else []) + (
            [flagged_text(flagged)] if flagged else []
        )
        if parts:
            out.append((s.name, "; ".join(parts)))
    return out


def identity_line(identity: Mapping[str, Any]) -> str:
    sha = identity.get("model_sha256")
    return (
        f"judge: {identity['model']}"
        + (f" (file sha256 {sha[:12]})" if sha else "")
        + f", prompt {identity['prompt']['id']}"
        + (f"; cache keyed on {identity['keyed_on']}" if identity.get("keyed_on") else "")
    )


def _figure(name: str, m: Interval | None) -> str:
    m = m or Interval(None)
    return f"{name} {num(m.value, 3)} [95% CI {num(m.ci_low, 3)}, {num(m.ci_high, 3)}]"


def calibration_lines(result: CalibrationResult) -> list[str]:
    """Agreement with human labels, with bootstrap 95% CIs, the confusion matrix and the ranking check."""
    a = result.agreement or Agreement(0)
    lines = [judged_line(result.statuses)]
    if a.n:
        for name, m in (("accuracy", a.accuracy), ("kappa", a.kappa)):
            lines.append(f"{name}: {_figure('', m).lstrip()} on {a.n} pairs")
        lines.append(f"LLM grade counted as relevant from: {a.relevant_from}")
        lines.append(
            "confusion (rows human 0/1, columns LLM grade 0..3): " + "; ".join(str(r) for r in a.confusion or ())
        )
    elif a.missing:
        lines.append(f"agreement: missing ({a.missing})")
    graded = result.graded
    if graded:
        a_uc = graded.auc
        auc_text = (
            f"{num(a_uc.value, 3)} [95% CI {num(a_uc.ci_low, 3)}, {num(a_uc.ci_high, 3)}]"
            if a_uc.value is not None
            else "n/a (one class only)"
        )
        lines.append(
            f"from token probabilities ({graded.score}): AUC {auc_text} on {graded.n} pairs; best threshold "
            f"{num(graded.threshold, 3)} (accuracy {num(graded.accuracy_at_threshold, 3)} on the same pairs, "
            f"{num(graded.accuracy_cross_validated, 3)} cross-validated)"
        )
    ranking = result.ranking
    if ranking:
        tau = ranking.kendall_tau
        lines.append(
            f"Kendall's tau between system rankings (human vs {ranking.labels}): {num(tau, 3) if tau is not None else 'n/a'} over {len(ranking.systems)} systems"
        )
        if ranking.llm_missing:
            lines.append(f"{ranking.metric} under LLM labels: missing ({ranking.llm_missing})")
    rel = result.judge_reliability
    if rel:
        lines.append(
            f"judge_reliability: disagreement {pct(rel.disagreement_rate)} on spot_check_n {rel.spot_check_n} ({rel.against})"
        )
    return lines


def rubric_calibration_lines(result: RubricCalibrationResult) -> list[str]:
    """Per rubric metric: judged N of M, agreement with the human verdicts (CIs), AUC and the PPI mean."""
    lines = []
    for metric, r in result.rubrics.items():
        a, j = r.agreement, r.judged
        head = f"{metric} ({r.scale}): judged {j.judged} of {j.of} human-verdicted samples"
        failed = ", ".join(f"{c} {s}" for s, c in sorted(r.statuses.items()) if s != "ok")
        lines.append(head + (f" ({failed})" if failed else ""))
        if a.n:
            kappa = a.weighted_kappa if a.kappa_name == "weighted_kappa" else a.kappa
            lines.append(f"  agreement: {_figure('accuracy', a.accuracy)}, {_figure(a.kappa_name, kappa)} on {a.n}")
        else:
            lines.append("  agreement: missing (no sample carries both a human verdict and a judge verdict)")
        graded = r.graded
        if graded and graded.auc.value is not None:
            lines.append(f"  from token probabilities: {_figure('AUC', graded.auc)} on {graded.n}")
        ppi = r.ppi
        if ppi:
            lines.append(
                f"  mean under human verdicts (PPI): {num(ppi.mean, 3)} [95% CI {num(ppi.ci_low, 3)}, "
                f"{num(ppi.ci_high, 3)}]{' clipped to ' + ppi.clipped if ppi.clipped else ''}, "
                f"{ppi.n_human} human / {ppi.n_llm} LLM"
            )
    return lines
