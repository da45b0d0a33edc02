"""`toolscale domains`: list, show, validate and check domain specs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from toolscale.cli.common import JsonFlag, console, err_console, plain, print_json
from toolscale.domain.catalog import catalog, get_domain, imported_domain, imported_names, load_domain
from toolscale.domain.coverage import coverage
from toolscale.domain.engine import Domain
from toolscale.errors import SpecError, ToolscaleError

app = typer.Typer(no_args_is_help=True, help="List, show, validate and check domain specs.")


def resolve_domain(name_or_path: str) -> Domain:
    """A catalog domain by name, or a spec file by path."""
    if name_or_path.endswith((".yaml", ".yml", ".json")) or Path(name_or_path).is_file():
        return load_domain(name_or_path)
    return get_domain(name_or_path)


def domain_summary(domain: Domain) -> dict[str, object]:
    spec = domain.spec
    return {
        "name": spec.name,
        "title": spec.title,
        "tables": len(spec.tables),
        "tools": len(spec.tools),
        "write_tools": sum(t.kind == "write" for t in spec.tools),
        "today": spec.today.isoformat(),
    }


# what the catalog's namesakes of τ²-bench's domains are (issue 16), said wherever they are listed
TAU2_STYLE = (
    "airline, retail and telecom are τ²-style domains modelled on τ²-bench's: their tools, arguments and "
    "data are toolscale's own, not τ²-bench's interfaces. tau2_retail is τ²-bench's retail interface itself; its "
    "data and tasks come from τ²-bench (`toolscale import tau2 DIR`), so synthesis leaves it out."
)


@app.command("list")
def list_domains(as_json: JsonFlag = False) -> None:
    """List the built-in catalog of domains, and the imported ones (their data comes from elsewhere)."""
    rows = [domain_summary(d) | {"data": "generated"} for d in catalog().values()]
    rows += [domain_summary(imported_domain(name)) | {"data": "imported"} for name in imported_names()]
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} built-in domains")
    columns = ("name", "title", "tables", "tools", "write_tools", "data")
    for column in columns:
        table.add_column(column, justify="right" if column in ("tables", "tools", "write_tools") else "left")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    console.print(table)
    console.print(TAU2_STYLE, markup=False)


@app.command("show")
def show(name: Annotated[str, typer.Argument(help="Catalog domain name or spec file path.")]) -> None:
    """Show a domain: its policy, tables and tools."""
    domain = resolve_domain(name)
    spec = domain.spec
    console.print(Text.assemble((spec.name, "bold"), plain(f" — {spec.title}  (today: {spec.today})")))
    console.print(spec.description, markup=False)
    tables = Table(title="tables")
    for column in ("table", "key", "fields"):
        tables.add_column(column)
    for tname, tspec in spec.tables.items():
        tables.add_row(tname, tspec.key, ", ".join(f"{f}:{s.type}" for f, s in tspec.fields.items()))
    console.print(tables)
    tools = Table(title="tools")
    for column in ("tool", "kind", "parameters", "description"):
        tools.add_column(column)
    for tool in spec.tools:
        params = ", ".join(f"{p}{'' if p in tool.parameters.required else '?'}" for p in tool.parameters.properties)
        tools.add_row(tool.name, tool.kind, params, tool.description)
    console.print(tools)
    console.print("policy", style="bold")
    console.print(spec.policy, markup=False)


@app.command("validate")
def validate(paths: Annotated[list[Path], typer.Argument(help="Spec files (YAML or JSON).")]) -> None:
    """Check spec files: shape, references and expressions. Exit 1 if any is invalid."""
    failed = 0
    for path in paths:
        try:
            domain = load_domain(path)
        except SpecError as exc:
            failed += 1
            for line in exc.lines():
                err_console.print(f"error: {line}", markup=False, soft_wrap=True)
            continue
        summary = domain_summary(domain)
        console.print(
            f"ok: {path} ({summary['name']}: {summary['tables']} tables, {summary['tools']} tools)", markup=False
        )
    if failed:
        raise typer.Exit(1)


@app.command("check")
def check(
    names: Annotated[
        list[str] | None, typer.Argument(help="Domain names or spec files (default: the catalog).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the database the calls run on.")] = 0,
) -> None:
    """Check that domains are real services, not toys.

    Related tables, enough guarded writes, every tool callable with sampled arguments, every write
    refusable by a precondition."""
    domains = [resolve_domain(n) for n in names] if names else list(catalog().values())
    failed = []
    for domain in domains:
        report = coverage(domain, seed=seed)
        status = ("ok", "green") if report.ok else ("FAILED", "red")
        console.print(Text.assemble(status, plain(f" {domain.name}: {len(report.outcomes)} tools exercised")))
        for problem in report.problems:
            console.print(f"  - {problem}", markup=False)
        if not report.ok:
            failed.append(domain.name)
    if failed:
        raise ToolscaleError(f"{len(failed)} domain(s) failed the check: {', '.join(failed)}")
