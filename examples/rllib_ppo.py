"""RLlib PPO (new API stack) with action masking on the PettingZoo parallel env.

All seven nodes share one policy. The env gives RLlib what its stock ``ActionMaskingTorchRLModule`` reads
(``observation="rllib"``: a flat ``observations`` Box and an ``action_mask``), repairs conflicting picks
(``conflicts="repair"``, since the parallel env's masks cannot see the other nodes' choices), and splits
the team reward evenly (``agent_reward="share"``) so that RLlib's episode return — the sum over agents — is
the team return, counted once. ``--forecast fm`` (or ``wls``) trains on the PettingZoo forecast env
(:func:`mara_agents.envs.forecast.parallel_env`) instead: each node's ``observations`` vector carries the frozen
predictor's per-slot forecast features, computed once per simulator step for all nodes (docs/environment.md,
"MARA-Forecast-v0"). Each iteration's team return, episode length, losses and sampled steps go
to TensorBoard in a new ``rllib_ppo_N`` folder under ``--logdir`` (default: the repository's gitignored
``runs/``). Every flag is checked before anything is built.

    python examples/rllib_ppo.py --iterations 20
    python examples/rllib_ppo.py --iterations 20 --forecast fm
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

import mara_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the examples' shared flag checks)

ENV_OPTIONS = {"observation": "rllib", "conflicts": "repair", "agent_reward": "share"}


def parallel_env(env_config: dict[str, Any]) -> Any:
    """The PettingZoo parallel env with the three options above: ``mara_env.parallel_env``, or the forecast env
    when ``env_config`` names a ``predictor``."""
    if "predictor" in env_config:
        from mara_agents.envs import forecast as forecast_env

        return forecast_env.parallel_env(**ENV_OPTIONS, **env_config)
    return mara_env.parallel_env(**ENV_OPTIONS, **env_config)


def make_env(env_config: dict[str, Any]) -> Any:
    """The RLlib env: ``ParallelPettingZooEnv`` over :func:`parallel_env`."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(parallel_env(dict(env_config)))


def build_config(env_config: dict[str, Any], batch_size: int, seed: int) -> Any:
    """A PPO config with one shared, action-masked policy for every node."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env("mara_parallel", make_env)
    module = RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                          model_config={"fcnet_hiddens": [64, 64], "head_fcnet_hiddens": [64]})
    return (
        PPOConfig()
        .environment("mara_parallel", env_config=env_config)
        .env_runners(num_env_runners=0, rollout_fragment_length="auto")
        .multi_agent(policies={"nodes"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: "nodes")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"nodes": module}))
        .training(train_batch_size_per_learner=batch_size, minibatch_size=min(batch_size, 128), num_epochs=2,
                  lr=3e-4)
        .debugging(seed=seed)
    )


def play(algo: Any, env_config: dict[str, Any], seed: int) -> tuple[dict[str, float], int]:
    """One greedy episode of the trained policy; returns the episode metrics and how many picks went to a
    masked-out (empty or taken) slot — zero when the mask is honoured."""
    import torch
    from ray.rllib.core.columns import Columns

    module = algo.get_module("nodes")
    env = parallel_env(env_config)
    observations, _ = env.reset(seed=seed)
    masked = 0
    while env.agents:
        agents = list(observations)
        batch = {key: torch.as_tensor(np.stack([observations[a][key] for a in agents]))
                 for key in ("observations", "action_mask")}
        with torch.no_grad():
            logits = module.forward_inference({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS]
        actions = logits.argmax(dim=-1).numpy()
        masked += int(sum(observations[a]["action_mask"][act] == 0 for a, act in zip(agents, actions)))
        observations, _, _, _, infos = env.step(dict(zip(agents, actions.tolist())))
    return infos["node_0"]["episode_metrics"], masked


def log_result(writer: Any, result: dict[str, Any]) -> None:
    """Every number RLlib reports about sampling (``env_runners``) and the shared policy's learner, as a
    TensorBoard scalar at the lifetime count of sampled env steps."""
    step = int(result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))
    for key in ("env_runners", "learners/nodes"):
        section: Any = result
        for part in key.split("/"):
            section = section.get(part, {}) if isinstance(section, dict) else {}
        for name, value in section.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
                writer.add_scalar(f"{key}/{name}", value, step)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train; returns the mean team return RLlib reports after each iteration (NaN before an episode ends)
    and one greedy episode's metrics and masked picks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=_args.integer(1, 10**6), default=20, help="training iterations")
    parser.add_argument("--batch-size", type=_args.integer(1, 10**7), default=4000,
                        help="env steps per training iteration")
    _args.add_env_flags(parser)
    _args.add_forecast_flags(parser)
    _args.add_logdir(parser)
    args = parser.parse_args(argv)
    _, forecast = _args.forecast_env(parser, args.forecast, args.forecast_kind)
    env_config = {**_args.env_kwargs(args), **forecast}
    _args.check_before_work(parser, lambda: parallel_env(env_config)).close()

    import ray
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.set_num_threads(1)  # tiny networks: more threads only contend for the cores
    started = not ray.is_initialized()  # leave a Ray the caller started running
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    writer = SummaryWriter(_args.new_run_dir(args.logdir, "rllib_ppo"))
    print(f"TensorBoard log: {writer.log_dir}")
    try:
        algo = build_config(env_config, args.batch_size, args.seed).build_algo()
        returns = []
        for iteration in range(args.iterations):
            result = algo.train()
            log_result(writer, result)
            team_return = float(result["env_runners"].get("episode_return_mean", float("nan")))
            returns.append(team_return)
            progress = "no episode finished yet" if np.isnan(team_return) else f"team return {team_return:.3f}"
            print(f"iteration {iteration + 1}: {progress}")
        metrics, masked = play(algo, env_config, seed=args.seed)
        print(f"greedy episode: success rate {100 * metrics['success_rate']:.1f} %, masked picks {masked}")
        algo.stop()
        return {"returns": returns, "metrics": metrics, "masked_picks": masked}
    finally:
        writer.close()
        if started:
            ray.shutdown()


if __name__ == "__main__":
    main()
