"""``import mara_env`` registers the simulator and the live backend with Gymnasium."""

import gymnasium as gym

import mara_env


def test_live_env_id_resolves_to_the_live_backend_without_starting_ray():
    from gymnasium.envs.registration import load_env_creator

    from mara_env.live.env import LiveMARAEnv

    assert load_env_creator(gym.spec(mara_env.LIVE_ENV_ID).entry_point) is LiveMARAEnv


def test_the_simulated_env_keeps_its_id_and_native_vector_entry_point():
    spec = gym.spec(mara_env.ENV_ID)
    assert spec.entry_point == "mara_env.gym_env:MARAEnv"
    assert spec.vector_entry_point == "mara_env.vector_env:MARAVectorEnv"
