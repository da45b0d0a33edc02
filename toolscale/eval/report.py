"""`toolscale eval report`: accuracy with a 95% interval, pass^k, cost, latency and calls per tool,
per policy and per domain, computed with polars from the `episodes` table."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import polars as pl

from toolscale.eval.runner import BUDGET_TAG, EvalOptions, budget_sweep, policy_label
from toolscale.store import CURRENT_TASK, Store

Z95 = 1.959963984540054


def wilson(successes: float, n: int) -> tuple[float, float]:
    """95% Wilson score interval for a proportion (sound at 0% and 100%, unlike the normal one)."""
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)  # exact at the ends, not 0.9999...
    return (low, high)


def pass_hat_k(successes: list[int], trials: list[int], k: int) -> float | None:
    """τ²-bench's pass^k: over tasks, the chance that k trials drawn from n all succeed,
    C(c, k) / C(n, k); None when some task has fewer than k trials."""
    if not successes or any(n < k for n in trials):
        return None
    return sum(math.comb(c, k) / math.comb(n, k) for c, n in zip(successes, trials, strict=True)) / len(successes)


def episodes_frame(store: Store) -> pl.DataFrame:
    rows = store.query(
        "SELECT policy, domain, task_id, trial, outcome, reward, cost_usd, latency_s, calls, "
        "usage->'agent'->'unpriced' AS unpriced, CAST(grade->>'followed' AS DOUBLE) AS followed, "
        "CAST(grade->>'reason_said' AS BOOLEAN) AS reason_said, "
        "(grade->'judged') IS NOT NULL AS judged, "
        "task_id IN (SELECT id FROM questions WHERE source LIKE 'import:%') AS imported, "
        f"grade->>'error' AS error FROM episodes WHERE {CURRENT_TASK}"
    )
    if not rows:
        return pl.DataFrame()
    for row in rows:
        row["calls"] = json.loads(row["calls"])
        row["unpriced"] = json.loads(row["unpriced"]) if row["unpriced"] else []
    return pl.DataFrame(rows, infer_schema_length=None)


def summarize(frame: pl.DataFrame) -> dict[str, Any]:
    per_task = frame.group_by("task_id").agg(pl.col("outcome").sum().alias("c"), pl.col("outcome").count().alias("n"))
    successes, trials = per_task["c"].cast(pl.Int64).to_list(), per_task["n"].to_list()
    n = frame.height
    accuracy = float(frame["outcome"].mean())  # type: ignore[arg-type]
    low, high = wilson(accuracy * n, n)
    calls: dict[str, float] = {}
    for episode_calls in frame["calls"].to_list():
        for tool, count in (episode_calls or {}).items():
            calls[tool] = calls.get(tool, 0) + (count or 0)  # polars unions the keys: absent is None
    unpriced = sorted({m for models in frame["unpriced"].to_list() for m in (models or [])})
    max_k = min(trials) if trials else 0
    return {
        "tasks": per_task.height,
        "episodes": n,
        "accuracy": accuracy,
        "ci95": [low, high],
        "pass_hat_k": {str(k): pass_hat_k(successes, trials, k) for k in range(1, max_k + 1)},
        "mean_reward": float(frame["reward"].mean()),  # type: ignore[arg-type]
        # service tasks: gold actions the agent also made; questions: supporting documents its searches found
        "gold_actions_followed": _mean(frame["followed"]),
        # refused tasks: the share whose reason the word check found said; not in `accuracy` (env/grading.py)
        "reason_said": _mean(frame["reason_said"].cast(pl.Float64)),
        "reason_episodes": int(frame["reason_said"].is_not_null().sum()),
        "mean_cost_usd": float(frame["cost_usd"].mean()),  # type: ignore[arg-type]
        "cost_complete": not unpriced,
        "unpriced_models": unpriced,
        "mean_latency_s": float(frame["latency_s"].mean()),  # type: ignore[arg-type]
        # episodes of imported benchmark questions (FRAMES, HLE) graded by a judge, and by rules: a
        # benchmark's accuracy is its judge's; rule-graded ones are labelled so wherever accuracy is shown
        "judged": int(frame["judged"].sum()) if "judged" in frame.columns else 0,
        "rule_graded_imported": int((frame["imported"] & ~frame["judged"]).sum()) if "imported" in frame.columns else 0,
        # ended by a failed model call (a bad reply, a timeout), counted as failures until a rerun plays them again
        "errored": int(frame["error"].is_not_null().sum()),
        # tools this policy never called are left out (the struct of calls unions every policy's keys)
        "calls_per_episode": {tool: count / n for tool, count in sorted(calls.items()) if count},
    }


def _mean(column: pl.Series) -> float | None:
    """The mean of the values that are there; None when none is (an old episode stored no share)."""
    present = column.drop_nulls()
    return float(present.mean()) if len(present) else None  # type: ignore[arg-type]


def pareto(points: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """The accuracy–cost frontier over policies given as name → (mean $ per task, accuracy): the
    policies no other beats on both, and the normalized area under the frontier's step function
    (best accuracy affordable at each budget from $0 to the dearest policy's cost)."""
    frontier = sorted(
        name
        for name, (cost, acc) in points.items()
        if not any(c <= cost and a >= acc and (c, a) != (cost, acc) for c, a in points.values())
    )
    steps = sorted((points[name] for name in frontier), key=lambda p: p[0])
    top = max((cost for cost, _ in points.values()), default=0.0)
    if top == 0:
        area = max((acc for _, acc in steps), default=0.0)
    else:
        area, best = 0.0, 0.0
        for i, (cost, acc) in enumerate(steps):
            best = max(best, acc)
            following = steps[i + 1][0] if i + 1 < len(steps) else top
            area += best * (following - cost)
        area /= top
    return {
        "frontier": frontier,
        "area": area,
        "points": {k: {"cost_usd": c, "accuracy": a} for k, (c, a) in points.items()},
    }


def shown_name(policy: str, summary: dict[str, Any]) -> str:
    """The policy's name as a table or a figure shows it: marked when some of its episodes on
    imported benchmark questions were graded by rules, not by the benchmark's judge (their accuracy
    is not the published kind)."""
    return f"{policy} (rule-graded)" if summary.get("rule_graded_imported") else policy


def setup_of(label: str) -> str:
    """The episode setup a policy's label names (`oracle@1a2b3c` → `1a2b3c`; "" for the default):
    tools, expert pool, preference, budgets but the swept ones. Runs of different setups never share
    a frontier: with another tool set or pool, a point is another experiment."""
    return label.split("@", 1)[1] if "@" in label else ""


def frontiers(points: dict[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """`pareto` within each setup (`setup_of`), by setup; only setups with two policies or more
    have a frontier worth drawing, but every setup is there."""
    by_setup: dict[str, dict[str, tuple[float, float]]] = {}
    for name, point in points.items():
        by_setup.setdefault(setup_of(name), {})[name] = point
    return {setup: pareto(group) for setup, group in sorted(by_setup.items())}


def _natural(label: str) -> list[Any]:
    """Sort key: numbers as numbers, so `oracle[turns=3]` comes before `oracle[turns=12]`."""
    return [(0, float(part), "") if part[:1].isdigit() else (1, 0.0, part) for part in re.split(r"(\d+\.?\d*)", label)]


def budget_curves(policies: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Accuracy against budget, per policy run at several budgets (`eval run --budget-sweep`): for
    each policy setup (its label less the budget tag) and kind of budget (turns, cost), the points
    in budget order (tagged runs only: an untagged one may have run on other tasks). Curves of two
    or more points."""
    found: dict[str, dict[str, dict[float, tuple[str, dict[str, Any]]]]] = {}
    for label, parts in policies.items():
        tags = dict(BUDGET_TAG.findall(label))
        base = BUDGET_TAG.sub("", label)
        for kind, budget in tags.items():
            found.setdefault(base, {}).setdefault(kind, {})[float(budget)] = (label, parts["overall"])
    curves: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for base, kinds in found.items():
        for kind, points in kinds.items():
            if len(points) < 2:
                continue
            curves.setdefault(base, {})[kind] = [
                {
                    "budget": budget,
                    "policy": label,
                    "accuracy": s["accuracy"],
                    "ci95": s["ci95"],
                    "mean_cost_usd": s["mean_cost_usd"],
                    "episodes": s["episodes"],
                }
                for budget, (label, s) in sorted(points.items())
            ]
    return curves


def paired_difference(frame: pl.DataFrame, a: str, b: str) -> dict[str, Any] | None:
    """Accuracy of policy `a` minus policy `b` on the tasks both ran (each task's success rate over
    its trials, so the tasks' own difficulty cancels out), with Newcombe's 95% interval for paired
    proportions. None when no task is shared."""
    per_task = (
        frame.filter(pl.col("policy").is_in([a, b]))
        .group_by("task_id", "policy")
        .agg(pl.col("outcome").mean().alias("rate"))
        .pivot(on="policy", index="task_id", values="rate")
        .drop_nulls()
    )
    if per_task.is_empty() or a not in per_task.columns or b not in per_task.columns:
        return None
    rates_a, rates_b = per_task[a].to_list(), per_task[b].to_list()
    difference = (sum(rates_a) - sum(rates_b)) / len(rates_a)
    return {"a": a, "b": b, "tasks": len(rates_a), "difference": difference, "ci95": list(newcombe(rates_a, rates_b))}


def newcombe(rates_a: list[float], rates_b: list[float]) -> tuple[float, float]:
    """95% interval for mean(a) − mean(b) over paired tasks: Newcombe's (1998) hybrid score method 10,
    each side's Wilson interval combined through the pairs' correlation. Unlike the normal one it
    keeps a width at the extremes (all wins, all ties, one task). Rates of several trials count as
    fractional successes of one task each: for 0/1 rates it is Newcombe's exactly."""
    n = len(rates_a)
    p_a, p_b = sum(rates_a) / n, sum(rates_b) / n
    low_a, high_a = wilson(sum(rates_a), n)
    low_b, high_b = wilson(sum(rates_b), n)
    phi = _paired_correlation(rates_a, rates_b, p_a, p_b)

    def spread(below: float, above: float) -> float:
        return math.sqrt(max(0.0, below**2 - 2 * phi * below * above + above**2))

    low = p_a - p_b - spread(p_a - low_a, high_b - p_b)
    high = p_a - p_b + spread(p_b - low_b, high_a - p_a)
    return (max(-1.0, low), min(1.0, high))


def _paired_correlation(rates_a: list[float], rates_b: list[float], p_a: float, p_b: float) -> float:
    """Newcombe's φ: the pairs' correlation, its positive part shrunk by 1/(2n) (his continuity
    correction, which keeps the interval from being too narrow); 0 when a side is all 0 or all 1."""
    n = len(rates_a)
    scale = math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    if scale == 0:
        return 0.0
    covariance = sum(x * y for x, y in zip(rates_a, rates_b, strict=True)) / n - p_a * p_b
    if covariance > 1 / (2 * n):
        return (covariance - 1 / (2 * n)) / scale
    return min(0.0, covariance) / scale


def stated_preferences(store: Store) -> dict[str, dict[str, Any]]:
    """The preference each evaluated policy label ran under (`eval run --preference`), read back from
    the runs' options: the label's hash stands for it."""
    found: dict[str, dict[str, Any]] = {}
    for row in store.query("SELECT config FROM runs WHERE command = 'eval run' ORDER BY started_at"):
        config = json.loads(row["config"]) if row["config"] else {}
        if not config.get("preference"):
            continue
        known = {k: v for k, v in config.items() if k in EvalOptions.model_fields}
        try:
            options = EvalOptions(**known)
        except ValueError:
            continue  # options of an older version: no label to match
        sweep = budget_sweep(options, config["budget_sweep"]) if config.get("budget_sweep") else [options]
        for each in sweep:
            for name in each.policies:
                found[policy_label(name, each)] = each.preference or {}
    return found


def preference_adherence(policies: dict[str, Any], preferences: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """For each policy run under a stated preference (and the same policy without one, when there):
    the preference, $ per task and calls per tool — whether it follows what the user asked."""
    rows = []
    for label, parts in policies.items():
        base = label.split("@", 1)[0]
        if label in preferences or any(other.split("@", 1)[0] == base for other in preferences):
            kept = {k: parts["overall"][k] for k in ("accuracy", "mean_cost_usd", "calls_per_episode")}
            rows.append({"policy": label, "preference": preferences.get(label), **kept})
    return rows if any(r["preference"] for r in rows) else []


def base_name(label: str) -> str:
    """A label as `eval run -p` was given it: `checkpoint:data/train/grpo#edd7a4[turns=4]@c7ab71`
    was run as `checkpoint:data/train/grpo`, `oracle@1a2b3c` as `oracle`."""
    return re.split(r"[#\[@]", label, maxsplit=1)[0]


LABEL_WIDTH = 32  # a label longer than this is shortened in an 80-column table or a figure's axis


def short_labels(labels: list[str], width: int = LABEL_WIDTH) -> dict[str, str]:
    """Each label as a narrow table or a figure shows it: a checkpoint's folder by its last part
    (`ckpt:grpo-tiny`), then without the checkpoint's hash (`#edd7a4`), each step taken only while
    every label stays distinct; budgets (`[turns=4]`) and the setup (`@c7ab71`) are always kept."""

    def folder(label: str) -> str:
        base = base_name(label)
        if base.startswith("checkpoint:"):
            base = "ckpt:" + base.removeprefix("checkpoint:").rstrip("/").rsplit("/", 1)[-1]
        return base + label[len(base_name(label)) :]

    def unhashed(label: str) -> str:
        return re.sub(r"#[0-9a-f]+", "", folder(label))

    shown = {label: label for label in labels}
    for shorten in (folder, unhashed):
        proposal = {label: shorten(label) if len(shown[label]) > width else shown[label] for label in labels}
        taken = list(proposal.values())
        for label, name in proposal.items():
            if taken.count(name) == 1 and name not in (shown[other] for other in labels if other != label):
                shown[label] = name  # distinct from every other label's name, before and after
    return shown


def resolved(policies: list[str], present: list[str]) -> list[str]:
    """The stored labels `policies` name: a label as stored, or a name as it was run, which names
    every setup it was run in (its checkpoint's hash, budgets, tools); in the order asked."""
    found: list[str] = []
    for policy in policies:
        matches = [policy] if policy in present else [label for label in present if base_name(label) == policy]
        if not matches:
            raise ValueError(f"no episodes of policy `{policy}` (the store has: {', '.join(present)})")
        found += [label for label in matches if label not in found]
    return found


def report(store: Store, policies: list[str] | None = None) -> dict[str, Any]:
    """Every policy's summary (or only `policies`, in that order, and the paired accuracy difference
    of the first with each other one), per domain, the accuracy–cost frontier, and the episodes left
    out because their tasks were replaced."""
    orphaned = store.orphaned_episodes()
    frame = episodes_frame(store)
    if frame.is_empty():
        return {"policies": {}, "orphaned": orphaned}
    present = sorted(frame["policy"].unique().to_list(), key=_natural)
    if policies:
        policies = resolved(policies, present)
        frame = frame.filter(pl.col("policy").is_in(policies))
    out: dict[str, Any] = {"policies": {}}
    for policy in policies or present:
        mine = frame.filter(pl.col("policy") == policy)
        out["policies"][policy] = {
            "overall": summarize(mine),
            "domains": {
                domain: summarize(mine.filter(pl.col("domain") == domain))
                for domain in sorted(mine["domain"].unique().to_list())
            },
        }
    points = {p: (v["overall"]["mean_cost_usd"], v["overall"]["accuracy"]) for p, v in out["policies"].items()}
    out["pareto"] = frontiers(points)
    out["budgets"] = budget_curves(out["policies"])
    out["preferences"] = preference_adherence(out["policies"], stated_preferences(store))
    if policies and len(policies) > 1:
        out["paired"] = [paired_difference(frame, policies[0], other) for other in policies[1:]]
    out["orphaned"] = orphaned
    return out


def training_steps(store: Store) -> list[dict[str, Any]]:
    """Each logged training step: its kind (`sft`, `grpo`: the run id's prefix), loss, SFT's token
    accuracy, and for GRPO the reward, accuracy and $ of its episodes."""
    rows = store.query(
        "SELECT train_id, step, loss, mean_token_accuracy, metrics FROM train_steps ORDER BY train_id, step"
    )
    steps = []
    for row in rows:
        metrics = json.loads(row["metrics"]) if row["metrics"] else {}
        steps.append({
            "train_id": row["train_id"], "kind": row["train_id"].split("-", 1)[0], "step": row["step"],
            "loss": row["loss"], "token_accuracy": row["mean_token_accuracy"], "reward": metrics.get("reward"),
            "episode_accuracy": metrics.get("episode/outcome"), "cost_usd": metrics.get("episode/cost_usd"),
            "eval_loss": metrics.get("eval_loss"),
        })  # fmt: skip
    return steps


def provenance(store: Store) -> dict[str, Any]:
    """Where a report's numbers come from: the store, its evaluation and training runs, the versions
    recorded by the latest."""
    runs = store.query(
        "SELECT run_id, command, status, started_at, versions FROM runs "
        "WHERE command LIKE 'eval%' OR command LIKE 'train%' ORDER BY started_at"
    )
    versions = json.loads(runs[-1]["versions"]) if runs and runs[-1]["versions"] else {}
    return {"store": str(store.path), "runs": runs, "versions": versions}
