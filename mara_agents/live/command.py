"""Run a registered policy on real training jobs: ``python -m mara_agents.live --policy fifo --nodes 4``.

The live backend (:mod:`mara_env.live`) runs every task as a real training run of a ``curves`` family recipe
on a Ray cluster (a local Ray unless ``--address``), one optimisation batch per node and step.  The command
plays one episode with a progress bar, prints a table — tasks, successes, expiries, node utilisation and the
per-step latency split into policy time, dispatch overhead and batch compute — writes the recorded curve
bank and the episode log, and replays the decisions in the simulator to check that they give the same
successes and expiries.  ``--bench`` measures dispatch overhead against batch compute for several M.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mara_common import checks
from mara_common.ray_support import require_ray
from mara_agents.allocators.registry import POLICIES, make_policy
from mara_agents.play.policy import Policy
from mara_env.config import MAX_NODES, MAX_WINDOW, MARAConfig
from mara_env.live import LiveEpisode, LiveMARAEnv, LiveSettings, LiveTask, replay_mismatches
from mara_env.live.runner import connect

OUTCOMES = ("succeeded", "expired", "running", "queued", "not arrived")


def play_episode(env: LiveMARAEnv, policy: Policy, seed: int, episode: LiveEpisode | None = None,
                 progress: bool = True, on_step: Callable[[LiveMARAEnv], None] | None = None
                 ) -> list[dict[str, float]]:
    """Play one live episode; returns per step the policy time and the env's dispatch timings (seconds).
    ``on_step(env)`` is called after every step (e.g. to refresh a progress display)."""
    policy.reset()
    observation, _ = env.reset(seed=seed, options={"episode": episode} if episode else None)
    limit = env.settings.max_steps
    bar = tqdm(total=limit, desc="live steps", unit="step", disable=not progress, file=sys.stderr)
    steps, successes, expiries, done = [], 0, 0, False
    while not done:
        began = time.perf_counter()
        action = policy.act(observation)
        policy_s = time.perf_counter() - began
        observation, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        successes, expiries = successes + info["successes"], expiries + info["expirations"]
        timing = env.log.steps[-1]
        steps.append({"policy_s": policy_s, **{k: v for k, v in timing.items() if k.endswith("_s") or k == "retries"}})
        bar.update(1)
        step_ms = 1e3 * (policy_s + steps[-1]["dispatch_s"])
        bar.set_postfix(succeeded=successes, expired=expiries, step_ms=f"{step_ms:.0f}")
        if on_step is not None:
            on_step(env)
    bar.close()
    return steps


def latency_rows(steps: Sequence[dict[str, float]]) -> list[tuple[str, np.ndarray]]:
    """Per-step latency parts in ms: policy, dispatch overhead (dispatch wall minus the slowest batch's
    compute), batch compute (the slowest batch of the step: the critical path when each node has its own
    core) and the whole step."""
    policy = np.array([s["policy_s"] for s in steps]) * 1e3
    wall = np.array([s["dispatch_s"] for s in steps]) * 1e3
    compute = np.array([s["compute_max_s"] for s in steps]) * 1e3
    return [("policy", policy), ("dispatch overhead", wall - compute), ("batch compute (slowest batch)", compute),
            ("step total", policy + wall)]


def summary_table(env: LiveMARAEnv, steps: Sequence[dict[str, float]], mismatches: list[str] | None) -> str:
    """The live table printed after an episode."""
    outcomes = env.task_outcomes()
    lines = [f"{'tasks':<34}{len(outcomes):>8}"]
    for name in OUTCOMES:
        count = outcomes.count(name)
        if count or name in ("succeeded", "expired"):
            lines.append(f"{name:<34}{count:>8}")
    lines.append(f"{'  of them: recipes failed':<34}{len(env.failed_tasks):>8}" if env.failed_tasks else "")
    lines.append(f"{'node utilisation':<34}{100 * env.metrics()['utilisation']:>7.1f}%")
    lines.append(f"{'batches run':<34}{sum(len(losses) for losses in env.losses):>8}")
    lines.append(f"{'batch retries':<34}{int(sum(s['retries'] for s in steps)):>8}")
    lines.append(f"\n{'per-step latency (ms)':<34}{'mean':>8}{'p50':>8}{'p95':>8}{'max':>8}")
    for label, values in latency_rows(steps):
        lines.append(f"{'  ' + label:<34}{values.mean():>8.2f}{np.median(values):>8.2f}"
                     f"{np.percentile(values, 95):>8.2f}{values.max():>8.2f}")
    for task, why in env.failed_tasks.items():
        lines.append(f"FAILED task {task} ({env.live_episode.tasks[task].family}): {why}")
    if mismatches is not None:
        verdict = "identical successes and expiries" if not mismatches else f"{len(mismatches)} mismatch(es)"
        lines.append(f"\nreplay in the simulator: {verdict}")
        lines.extend(f"  {line}" for line in mismatches[:10])
    return "\n".join(line for line in lines if line != "")


def bench_episode(num_nodes: int, family: str, steps: int) -> LiveEpisode:
    """M tasks at t = 0 that can never succeed (ε tiny) and outlive the run, so every node is busy every step."""
    return LiveEpisode(tuple(LiveTask(0, family, 100 + k, 200 + k, 32, 1e-3, 1e-9, steps + 5)
                             for k in range(num_nodes)))


def bench(nodes: Sequence[int], family: str, steps: int, address: str | None, device: str) -> str:
    """Dispatch overhead against batch compute for each M (steps after the first, which warms workers up).

    The overhead splits into the state restore and save inside the workers (worker time minus compute,
    per batch) and the rest: Ray's submission, scheduling and transfers, and waiting for a free core.
    """
    connect(address, None if address else max(nodes))
    load = os.getloadavg()[0]
    rows = [f"{'M':>3}{'step wall':>11}{'slowest batch':>15}{'sum of batches':>16}{'overhead':>10}"
            f"{'overhead/batch':>16}{'state i/o/batch':>17}{'policy':>8}"]
    for m in nodes:
        env = LiveMARAEnv(MARAConfig(num_nodes=m, max_active=m, arrival_window=1),
                          LiveSettings(families=(family,), max_steps=steps, device=device, address=address))
        try:
            timings = play_episode(env, make_policy("fifo"), 0, bench_episode(m, family, steps), progress=False)[1:]
        finally:
            env.close()
        mean = {key: 1e3 * float(np.mean([s[key] for s in timings])) for key in timings[0] if key != "retries"}
        overhead = mean["dispatch_s"] - mean["compute_max_s"]
        rows.append(f"{m:>3}{mean['dispatch_s']:>11.2f}{mean['compute_max_s']:>15.2f}{mean['compute_sum_s']:>16.2f}"
                    f"{overhead:>10.2f}{overhead / m:>16.2f}"
                    f"{(mean['worker_sum_s'] - mean['compute_sum_s']) / m:>17.2f}{mean['policy_s']:>8.3f}")
    rows.append(f"(ms per step, mean over {steps - 1} steps after the first; {family}, batch 32, {device}; "
                f"load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    return "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mara_agents.live", description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default="fifo", help=f"registered policy: {', '.join(sorted(POLICIES))}")
    parser.add_argument("--nodes", type=int, default=4, help="M, nodes (one Ray CPU each, or one GPU with cuda)")
    parser.add_argument("--families", nargs="+", default=["cnn_fmnist"], help="families tasks are drawn from")
    parser.add_argument("--steps", type=int, default=200, help="steps to run (the episode is cut there)")
    parser.add_argument("--window", type=int, default=None, help="arrival window T (default: --steps)")
    parser.add_argument("--max-active", type=int, default=10, help="K, task slots")
    parser.add_argument("--arrival-prob", type=float, default=0.04, help="p, arrival probability per step")
    parser.add_argument("--seed", type=int, default=0, help="episode draw seed")
    parser.add_argument("--preset", choices=("cpu", "paper"), default="cpu", help="model sizes")
    parser.add_argument("--device", default="cpu", help="torch device of the workers, e.g. cuda")
    parser.add_argument("--data-root", default=None, help="folder with the paper's data")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--node-cpus", type=float, default=1.0, help="logical CPUs per node (below 1 packs nodes)")
    parser.add_argument("--attempts", type=int, default=3, help="tries per batch before a task's recipe fails")
    parser.add_argument("--out", default=None, help="folder for the bank and episode log (default runs/live/...)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--bench", action="store_true", help="measure dispatch overhead vs batch compute per M")
    parser.add_argument("--bench-nodes", type=int, nargs="+", default=[1, 2, 4, 8], help="M values of --bench")
    parser.add_argument("--bench-steps", type=int, default=30, help="steps per M in --bench")
    return parser


def check_counts(args: argparse.Namespace) -> None:
    """Refuse a count the user typed, by its flag, before any work: the env would refuse it later under its own
    field name (``--steps 0`` as ``arrival_window``), or take ``--window 0`` for ``--steps``."""
    checks.integer("--nodes", args.nodes, low=1, high=MAX_NODES)
    checks.integer("--steps", args.steps, low=1, high=MAX_WINDOW)
    if args.window is not None:
        checks.integer("--window", args.window, low=1, high=MAX_WINDOW)
    checks.integer("--attempts", args.attempts, low=1)
    checks.integer("--bench-steps", args.bench_steps, low=2)  # the first step is not timed


def writable_folder(out: Path, argument: str = "out") -> None:
    """Check before any work that files can be written into ``out`` (``ValueError`` naming ``argument`` if not),
    by creating it and a temporary file in it; folders this check created are removed again."""
    missing = [path for path in (out, *out.parents) if not path.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as exc:
        raise ValueError(f"{argument}: cannot write into {out}: {exc.strerror or exc}") from None
    finally:
        for path in missing:  # deepest first
            try:
                path.rmdir()
            except OSError:
                break


def default_out(args: argparse.Namespace) -> Path:
    """``--out``, or ``runs/live/<policy>-m<M>-seed<seed>-<UTC time>``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path(args.out or f"runs/live/{args.policy}-m{args.nodes}-seed{args.seed}-{stamp}")


def run(args: argparse.Namespace, out: Path) -> str:
    """Play the episode the arguments describe, save it into ``out`` (also when interrupted: what was recorded
    so far), replay it; returns the table."""
    config = MARAConfig(num_nodes=args.nodes, max_active=args.max_active, arrival_prob=args.arrival_prob,
                        arrival_window=args.window or args.steps, max_nodes=max(16, args.nodes),
                        abandon=POLICIES[args.policy].abandon if args.policy in POLICIES else False)
    settings = LiveSettings(families=tuple(args.families), preset=args.preset, device=args.device,
                            data_root=args.data_root, max_steps=args.steps, attempts=args.attempts,
                            address=args.address, node_cpus=args.node_cpus)
    policy = make_policy(args.policy)
    env = LiveMARAEnv(config, settings)
    steps: list[dict[str, float]] = []
    try:
        steps = play_episode(env, policy, args.seed, progress=not args.no_progress)
    finally:
        if env.log is not None:
            env.save(out, policy=args.policy, policy_s=[s["policy_s"] for s in steps])
        env.close()
    head = (f"live episode: policy {args.policy}, {args.nodes} nodes, families {' '.join(args.families)}, "
            f"{len(steps)} steps, seed {args.seed}\n")
    return head + summary_table(env, steps, replay_mismatches(out)) + f"\nwrote {out}/bank and {out}/episode.json"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: bad arguments or an unusable setting print one line and exit with status 2; a Ray
    cluster that cannot be reached, one line and status 1; Ctrl-C or SIGTERM (mapped to Ctrl-C when run as
    a command) stops the batches, saves what was recorded and exits with status 130."""
    args = _parser().parse_args(argv)
    try:
        ray = require_ray("python -m mara_agents.live")
    except ModuleNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = default_out(args)
    try:
        check_counts(args)
        if not args.bench:
            writable_folder(out, "--out")
        if args.bench:
            print(bench(args.bench_nodes, args.families[0], args.bench_steps, args.address, args.device))
        else:
            print(run(args, out))
    except KeyboardInterrupt:
        saved = f"what was recorded is saved in {out}" if (out / "episode.json").exists() else "nothing was saved"
        print(f"\ninterrupted: stopped the batches; {saved}", file=sys.stderr)
        return 130
    except ConnectionError as exc:
        print(f"error: --address: {exc}", file=sys.stderr)
        return 1
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if ray.is_initialized():
            ray.shutdown()
    return 0

