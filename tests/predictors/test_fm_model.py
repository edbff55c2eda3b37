"""FM inputs, network, path and loss (paper §4.1, Eqs. 7–8), the predictor and its checkpoint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mara_agents.predictors.base import Predictor, PredictorQuery
from mara_agents.predictors.fm import (
    CheckpointError,
    FlowMatchingModel,
    FlowMatchingPredictor,
    FMHyperParameters,
    load_model,
    load_predictor,
    save_checkpoint,
)
from mara_agents.predictors.fm.encoding import STATIC_FEATURES, encode_history, static_context, thinned_positions
from mara_agents.predictors.fm.model import flow_matching_loss, linear_path, sinusoidal_embedding

SMALL = FMHyperParameters(hidden=8, history_points=16, width=16, time_dim=8)


def tiny_model(seed: int = 0) -> FlowMatchingModel:
    torch.manual_seed(seed)
    model = FlowMatchingModel(SMALL)
    for p in model.parameters():  # a visibly non-trivial velocity field
        torch.nn.init.normal_(p, std=0.3)
    return model


def power_query(lengths: list[int], eps: float = 0.6, cap: float = 100.0) -> PredictorQuery:
    width = max(lengths)
    history = np.zeros((len(lengths), width))
    for row, n in enumerate(lengths):
        history[row, :n] = 2.0 * np.arange(1, n + 1) ** -0.4
    k = len(lengths)
    return PredictorQuery(history, np.array(lengths), np.full(k, 16.0), np.full(k, 1e-3), np.full(k, eps),
                          np.full(k, cap))


def test_history_encoding_features_match_their_definitions():
    history = torch.tensor([[4.0, 2.0, 1.0, 0.0]])
    encoded, count = encode_history(history, torch.tensor([3]), torch.tensor([10.0]), points=8)
    assert count.tolist() == [3] and encoded.shape == (1, 3, 4)
    expected_samples = torch.log(torch.tensor([10.0, 20.0, 30.0]))
    assert torch.allclose(encoded[0, :, 0], expected_samples)
    assert torch.allclose(encoded[0, :, 1], torch.log(torch.tensor([4.0, 2.0, 1.0])))  # relative to L = 1
    assert encoded[0, 2, 1] == 0.0  # the current point is the reference
    assert torch.allclose(encoded[0, 1:, 2:], torch.diff(encoded[0, :, :2], dim=0))
    assert torch.all(encoded[0, 0, 2:] == 0)


def test_thinned_positions_keep_short_prefixes_whole_and_end_at_the_current_point():
    positions, count = thinned_positions(torch.tensor([5, 16, 300]), points=16)
    assert count.tolist() == [5, 16, 16]
    assert positions[0, :5].tolist() == [1, 2, 3, 4, 5] and positions[1].tolist() == list(range(1, 17))
    assert positions[2, -1] == 300 and torch.all(torch.diff(positions[2]) > 0)


def test_static_context_is_log_batch_log_lr_loss_log_horizon():
    context = static_context(torch.tensor([32.0]), torch.tensor([1e-3]), torch.tensor([0.5]), torch.tensor([640.0]))
    assert torch.allclose(context, torch.tensor([[math.log(32), math.log(1e-3), 0.5, math.log(640)]]))


def test_linear_path_joins_noise_to_target():
    z0, z1 = torch.zeros(2, 3), torch.ones(2, 3)
    assert torch.allclose(linear_path(z0, z1, torch.tensor([0.0, 1.0])), torch.tensor([[0.0] * 3, [1.0] * 3]))
    assert torch.allclose(linear_path(z0, z1, torch.tensor([0.25, 0.25])), torch.full((2, 3), 0.25))


def test_flow_matching_loss_vanishes_for_the_true_velocity_and_sums_coordinates():
    z0, z1 = torch.randn(4, 32), torch.randn(4, 32)
    assert flow_matching_loss(z1 - z0, z0, z1) == 0.0
    assert torch.isclose(flow_matching_loss(z1 - z0 + 1.0, z0, z1), torch.tensor(32.0))


def test_sinusoidal_embedding_distinguishes_flow_times():
    embedding = sinusoidal_embedding(torch.tensor([0.0, 0.25, 1.0]), 8)
    assert embedding.shape == (3, 8)
    assert not torch.allclose(embedding[0], embedding[1]) and not torch.allclose(embedding[1], embedding[2])


def test_predictor_is_deterministic_and_follows_the_interface():
    predictor = FlowMatchingPredictor(tiny_model(), n_samples=8, euler_steps=4)
    query = power_query([3, 10, 40])
    first, second = predictor.predict(query), predictor.predict(query)
    assert isinstance(predictor, Predictor)
    np.testing.assert_array_equal(first.remaining, second.remaining)
    np.testing.assert_array_equal(first.trajectories[1:], second.trajectories[1:])
    assert first.remaining[0] == 100.0 and np.isnan(first.trajectories[0]).all()  # < 4 observations → cap
    assert first.trajectories.shape == (3, 8, 33) and first.grid.shape == (3, 33)
    assert np.all((first.remaining >= 0) & (first.remaining <= 100.0))
    assert first.grid[1, 0] == 10 and first.grid[1, -1] == 110  # the horizon is the cap, in batches
    np.testing.assert_allclose(first.trajectories[1, :, 0], query.current_loss[1])


def test_one_forecast_serves_every_threshold():
    """ε enters only the decode: trajectories are identical, estimates move monotonically with ε."""
    predictor = FlowMatchingPredictor(tiny_model())
    low, high = predictor.predict(power_query([20], eps=0.3)), predictor.predict(power_query([20], eps=0.9))
    np.testing.assert_array_equal(low.trajectories, high.trajectories)
    assert low.remaining[0] >= high.remaining[0]


def test_batched_prediction_matches_one_task_at_a_time():
    predictor = FlowMatchingPredictor(tiny_model())
    query = power_query([5, 12, 30, 7])
    batched = predictor.predict(query).remaining
    single = [predictor.predict(query.subset(np.array([i]))).remaining[0] for i in range(4)]
    np.testing.assert_allclose(batched, single, rtol=1e-4, atol=1e-3)


def test_checkpoint_round_trip_gives_identical_predictions_and_stays_small(tmp_path):
    model = tiny_model()
    save_checkpoint(tmp_path / "fm.pt", model)
    query = power_query([8, 25])
    np.testing.assert_array_equal(FlowMatchingPredictor(model).predict(query).remaining,
                                  load_predictor(tmp_path / "fm.pt").predict(query).remaining)
    save_checkpoint(tmp_path / "full.pt", FlowMatchingModel())
    assert (tmp_path / "full.pt").stat().st_size < 1_000_000  # the paper-size model is well under 1 MB


def test_missing_checkpoint_error_names_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere.pt"):
        load_model(tmp_path / "nowhere.pt")


def test_corrupt_checkpoint_error_names_the_file(tmp_path):
    save_checkpoint(tmp_path / "fm.pt", tiny_model())
    data = (tmp_path / "fm.pt").read_bytes()
    (tmp_path / "fm.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="fm.pt.*corrupt"):  # its manifest's checksum no longer matches
        load_model(tmp_path / "fm.pt")
    (tmp_path / "fm.json").unlink()
    with pytest.raises(CheckpointError, match="fm.pt: unreadable FM checkpoint"):  # read unverified
        load_model(tmp_path / "fm.pt", verify=False)
    torch.save({"something": "else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="other.pt: FM checkpoint has no manifest"):
        load_model(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="other.pt: not a FM checkpoint"):
        load_model(tmp_path / "other.pt", verify=False)


def test_the_sampling_velocity_equals_the_plain_one():
    """The factorised first layer used for sampling computes v_θ(z, u, c) of the plain forward pass."""
    torch.manual_seed(0)
    model = FlowMatchingModel().eval()
    tasks, repeats = 5, 8
    context = torch.randn(tasks, model.hparams.hidden + STATIC_FEATURES)
    z = torch.randn(tasks * repeats, model.hparams.bins)
    u = torch.full((tasks * repeats,), 0.25)
    with torch.no_grad():
        plain = model.velocity(z, u, context.repeat_interleave(repeats, dim=0))
        fast = model.sampling_velocity(context, repeats)(z, u)
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)


def test_kept_flow_time_terms_give_the_same_velocity_bit_for_bit():
    """A caller's kept time terms are the ones the velocity computes: the same output with and without them,
    one term per flow time, reused on later calls."""
    torch.manual_seed(1)
    model = FlowMatchingModel().eval()
    context = torch.randn(4, model.hparams.hidden + STATIC_FEATURES)
    z = torch.randn(4 * 8, model.hparams.bins)
    kept: dict[float, torch.Tensor] = {}
    with torch.inference_mode():
        for u in (0.0, 0.25, 0.0):
            flow_time = torch.full((z.shape[0],), u)
            plain = model.sampling_velocity(context, 8)(z.clone(), flow_time)
            assert torch.equal(model.sampling_velocity(context, 8, kept)(z.clone(), flow_time), plain)
    assert sorted(kept) == [0.0, 0.25]
