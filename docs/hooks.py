"""MkDocs hooks: the reference pages are generated from the code at build time, so they cannot drift.

- `reference/cli.md`: every command, subcommand and option of the Typer app (`retbench.cli.app`);
- `reference/metrics.md`: every metric of the registry with its meaning, parameters and trec_eval name;
- `reference/config.md`: every config kind from the JSON Schema `retbench schema KIND` prints.

Each generated page replaces the placeholder file of the same name under docs/reference/ in memory; nothing
is written to the repository.
"""

from __future__ import annotations

import json
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
def metrics_reference() -> str:
    """The registry's own declaration of every metric (`registry.catalog()`, what `retbench metrics --json` prints)."""
    from retbench.metrics.registry import catalog

    out = [
        "# Metrics",
        "",
        "Generated from the metric registry at build time (`retbench metrics --json` prints the same rows). A name",
        "takes a cutoff where the table says so (`ndcg@10`); `trec_eval` gives the names `trec_eval -m` prints for",
        "the same number, which retbench matches to 1e-9 (tests compare every one against pytrec_eval), and the",
        "values trec_eval computes when the family is named bare; `summed up` is how the per-query values become",
        "one number, as trec_eval's `all` line does (mean; gmean: geometric mean with a 1e-5 floor; sum).",
        "",
        "| metric | meaning | cutoff | parameters | aliases | trec_eval | summed up | side |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(catalog(), key=lambda r: r["name"].lower()):
        params = ", ".join(f"`{k}`={v:g}" for k, v in r["parameters"].items())
        aliases = ", ".join(f"`{a}`" for a in r["aliases"])
        trec = ", ".join(f"`{t}`" for t in r["trec_eval"])
        if r["trec_defaults"]:
            trec += " (bare: " + ", ".join(f"{v:g}" for v in r["trec_defaults"]) + ")"
        side = "answer" if r["answer_side"] else "ranking"
        meaning = _escape(r["meaning"] or r["definition"])
        row = [f"`{r['name']}`", meaning, r["cutoff"], params, aliases, trec, r["aggregate"], side]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


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


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    make = GENERATED.get(page.file.src_uri)
    return make() if make is not None else markdown
