"""The reference pages of the docs site, generated from the code so they cannot drift; run before any build.

- `reference/cli.md`: every command, subcommand and option of the Typer app (`retbench.cli.app`);
- `reference/metrics.md`: every metric of the registry, grouped by family, with its meaning, parameters
  and trec_eval name;
- `reference/config.md`: every config kind from the JSON Schema `retbench schema KIND` prints.

`python scripts/docs_reference.py [DOCS_DIR]` writes the three pages into DOCS_DIR/reference/ (default:
docs/), so any site builder (MkDocs, Zensical) finds them as ordinary files; the pages are not committed
(.gitignore). MkDocs needs no such step: mkdocs.yml names this file as a hook, and `on_files` adds the pages
to the build as generated files, so a build writes nothing into docs/. This file lives outside docs/ so it is
never published.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any


def _escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# -- CLI -------------------------------------------------------------------------------------------
def _command_section(cmd: Any, path: list[str], level: int) -> list[str]:
    """One command's section (typer ships its own click, so commands are read by duck typing)."""
    ctx = cmd.context_class(cmd, info_name=path[-1])
    out = [f"{'#' * level} `{' '.join(path)}`", ""]
    if cmd.help:
        out += [cmd.help.strip(), ""]
    pieces = cmd.collect_usage_pieces(ctx)
    out += ["```text", f"Usage: {' '.join([*path, *pieces])}", "```", ""]
    rows = []
    for p in cmd.params:
        kind = getattr(p, "param_type_name", "")
        if kind == "argument":
            rows.append((f"`{(p.name or '').upper()}`", "argument", "required" if p.required else "optional", ""))
        elif kind == "option" and not getattr(p, "hidden", False):
            names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            default = "" if p.default in (None, False, ()) or callable(p.default) else f"`{p.default}`"
            shown = getattr(p, "display_type", None) or getattr(getattr(p, "type", None), "name", "")
            shown = shown(ctx) if callable(shown) else shown
            rows.append((names, _escape(str(shown)), default, _escape(p.help or "")))
    if rows:
        out += ["| name | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
        out.append("")
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            out += _command_section(sub, [*path, name], min(level + 1, 4))
    return out


def cli_reference() -> str:
    import typer.main

    from retbench.cli import app

    group = typer.main.get_command(app)
    out = [
        "# Command line",
        "",
        "Generated from the Typer app at build time. Exit codes: 0 ok; 1 a gate failed; 2 usage or input error;",
        "3 a backend failed during the run.",
        "",
    ]
    for name, cmd in group.commands.items():
        out += _command_section(cmd, ["retbench", name], 2)
    return "\n".join(out) + "\n"


# -- metrics ---------------------------------------------------------------------------------------
# The families the reference groups metrics into, in this order. A metric's family is read from where the
# registry row's function lives (metrics/retrieval.py, trec_rows.py, families.py, judged.py, answers.py);
# the measures made for incomplete judgements are named here; a plugin's row falls under "Plugins".
INCOMPLETE = {"bpref", "gm_bpref", "infAP", "unj", "num_nonrel_judged_ret", "judged", "holes"}
FAMILIES = [
    ("Ranking", "retbench.metrics.retrieval", "The rank metrics most studies report: nDCG, recall, MAP, MRR and kin."),
    ("trec_eval's other measures", "retbench.metrics.trec_rows", "The rest of `trec_eval -m all_trec`."),
    (
        "Incomplete judgements",
        "",
        "Measures for pools where not every retrieved document was judged, and how many were.",
    ),
    ("ir_measures families", "retbench.metrics.families", "User-model and diversity measures of ir_measures."),
    ("LLM-judged", "retbench.metrics.judged", "Scored per sample by the LLM judge (its identity is kept)."),
    ("Answers", "retbench.metrics.answers", "Scored on a system's generated answer, not its ranking."),
    ("Plugins", None, "Metrics registered by installed plugins."),
]


def metric_family(name: str, module: str | None) -> str:
    """The family heading of a registry row (see FAMILIES)."""
    if name in INCOMPLETE:
        return "Incomplete judgements"
    return next((title for title, mod, _ in FAMILIES if mod and mod == module), "Plugins")


def _metric_names(r: dict[str, Any]) -> str:
    """The name as written, with its cutoff: `recall@k`; `ndcg` · `ndcg@k`; then its aliases."""
    name = r["name"]
    forms = {"k": [f"{name}@k"], "optional": [name, f"{name}@k"]}.get(r["cutoff"], [name])
    shown = " · ".join(f"`{f}`" for f in forms)
    if r["aliases"]:
        shown += "<br>also " + ", ".join(f"`{a}`" for a in r["aliases"])
    return shown


def _trec_names(r: dict[str, Any], templates: dict[str, list[str]]) -> str:
    """trec_eval's names, a parameter in angle brackets (`P_<k>`, `iprec_at_recall_<recall>`)."""
    names = templates.get(r["name"]) or r["trec_eval"]
    trec = ", ".join(f"`{t}`" for t in names)
    if r["trec_defaults"]:
        trec += " (bare: " + ", ".join(f"{v:g}" for v in r["trec_defaults"]) + ")"
    return trec


def _family_table(rows: list[dict[str, Any]], templates: dict[str, list[str]]) -> list[str]:
    """One family's table; a column no row of the family fills is left out."""
    columns = [
        ("metric", _metric_names),
        ("meaning", lambda r: _escape(r["meaning"] or r["definition"])),
        ("parameters", lambda r: ", ".join(f"`{k}`={v:g}" for k, v in r["parameters"].items())),
        ("trec_eval", lambda r: _trec_names(r, templates)),
        ("summed up", lambda r: r["aggregate"] if r["aggregate"] != "mean" else ""),
    ]
    cells = [[fn(r) for _, fn in columns] for r in rows]
    keep = [j for j in range(len(columns)) if j < 2 or any(c[j] for c in cells)]
    out = ["| " + " | ".join(columns[j][0] for j in keep) + " |", "|" + "|".join("---" for _ in keep) + "|"]
    out += ["| " + " | ".join(c[j] for j in keep) + " |" for c in cells]
    return out


def metrics_reference() -> str:
    """The registry's own declaration of every metric (`catalog.catalog()`, what `retbench metrics --json`
    prints), one table per family."""
    from retbench.metrics.base import row_of
    from retbench.metrics.catalog import available, catalog

    metrics = available()
    modules = {n: getattr(getattr(m, "fn", None), "__module__", None) for n, m in metrics.items()}
    rows = {n: row_of(m) for n, m in metrics.items()}
    templates = {n: [re.sub(r"\{(\w+)[^}]*\}", r"<\1>", t) for t in (r.trec, r.trec_cut) if t] for n, r in rows.items()}
    by_family: dict[str, list[dict[str, Any]]] = {}
    for r in catalog():
        by_family.setdefault(metric_family(r["name"], modules.get(r["name"])), []).append(r)
    out = [
        "---",
        "hide:",
        "  - navigation",
        "  - toc",
        "---",
        "",
        "# Metrics",
        "",
        "Generated from the metric registry before each build (`retbench metrics --json` prints the same rows),",
        "grouped by family. A name takes a cutoff where it shows one (`ndcg@10`; `k` stands for the cutoff);",
        "`trec_eval` gives the names `trec_eval -m` prints for the same number (`P_<k>`: `P_10` for k = 10; a",
        "parameter likewise), which retbench matches to 1e-9",
        "(tests compare every one against pytrec_eval), and the values trec_eval computes when the family is",
        "named bare; `summed up` is shown where the per-query values do not become one number by their mean, as",
        "trec_eval's `all` line does (gmean: geometric mean with a 1e-5 floor; sum).",
        "",
        "Families: " + ", ".join(f"[{t}](#{_anchor(t)})" for t, _, _ in FAMILIES if t in by_family) + ".",
        "",
    ]
    for title, _, blurb in FAMILIES:
        if title in by_family:
            out += [f"## {title}", "", blurb, "", *_family_table(by_family[title], templates), ""]
    return "\n".join(out + declarations_reference()) + "\n"


def declarations_reference() -> list[str]:
    """What a metric may declare beside `name`, `cutoff` and `compute`, from `metrics.base.MetricRow` itself: each
    field, its type, the default a metric that leaves it out gets, and what reads it."""
    from dataclasses import MISSING, fields

    from retbench.metrics.base import MetricRow

    out = [
        "## Declaring a metric",
        "",
        "A metric (a built-in row or a plugin, see [Writing a plugin](../howto/plugins.md)) is an object with `name`,",
        "`cutoff` and `compute(ctx, k, params)`; it may also declare any of these attributes. One that is left out",
        "(or None) takes the default; `retbench.metrics.register` refuses a declaration of the wrong kind, naming it.",
        "",
        "| declaration | type | default | what it says |",
        "|---|---|---|---|",
    ]
    for f in fields(MetricRow):
        default = f.default_factory() if f.default_factory is not MISSING else f.default  # type: ignore[misc]
        kind = str(f.type).replace("|", "\\|")
        out.append(f"| `{f.name}` | `{kind}` | `{default!r}` | {_escape(f.metadata['doc'])} |")
    return [*out, ""]


def _anchor(title: str) -> str:
    """The id MkDocs' toc extension gives a heading (lower case, punctuation dropped, spaces to dashes)."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return "-".join(kept.split())


# -- config ----------------------------------------------------------------------------------------
def _type_of(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " \\| ".join(_type_of(p) for p in prop[key])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {_type_of(prop['additionalProperties'])}"
    return str(kind)


def _model_table(name: str, schema: dict[str, Any], level: int) -> list[str]:
    out = [f"{'#' * level} {name}", ""]
    if schema.get("description"):
        out += [_escape(schema["description"]), ""]
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        out += ["| field | type | required | default | meaning |", "|---|---|---|---|---|"]
        for field, prop in props.items():
            default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
            out.append(
                f"| `{field}` | {_type_of(prop)} | {'yes' if field in required else ''} | {default} | "
                f"{_escape(prop.get('description', ''))} |"
            )
        out.append("")
    return out


def config_reference() -> str:
    from retbench.config.schema import KINDS, json_schema

    out = [
        "# Config files",
        "",
        "Generated from the typed config models at build time (the same JSON Schema `retbench schema KIND`",
        "prints; point your editor at it with `# yaml-language-server: $schema=...`). Unknown keys are errors",
        "that name the file, line and field.",
        "",
    ]
    for kind in KINDS:
        schema = json_schema(kind)
        out += [f"## {kind}", ""]
        out += _model_table(schema.get("title", kind), schema, 3)
        for name, sub in sorted(schema.get("$defs", {}).items()):
            out += _model_table(name, sub, 4)
    return "\n".join(out) + "\n"


GENERATED = {
    "reference/cli.md": cli_reference,
    "reference/metrics.md": metrics_reference,
    "reference/config.md": config_reference,
}


def write_pages(docs_dir: Path) -> list[Path]:
    """Write every generated page under `docs_dir`; an unchanged page is left as it is (no rebuild loop)."""
    written = []
    for rel, make in GENERATED.items():
        target = docs_dir / rel
        text = make()
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    """MkDocs hook: the pages join the build as generated files, so a build writes nothing into docs/."""
    from mkdocs.structure.files import File

    for rel, make in GENERATED.items():
        files.append(File.generated(config, rel, content=make()))
    return files


if __name__ == "__main__":
    for page in write_pages(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "docs")):
        print(f"wrote {page}")
