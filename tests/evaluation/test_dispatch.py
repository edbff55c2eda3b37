"""Units to workers (``mara_agents.evaluation.dispatch``): the units on the same episodes form one bundle, a
worker plays its bundle's units in a row, and an idle worker takes units from the end of another's bundle, so
every unit is handed out exactly once."""

from __future__ import annotations

from types import SimpleNamespace

from mara_agents.evaluation.dispatch import BundleQueue, same_episodes


def unit(method: str, path: str, first: int, episodes: int) -> SimpleNamespace:
    targets = tuple(SimpleNamespace(path=path, index=first + i) for i in range(episodes))
    return SimpleNamespace(method=method, targets=targets, keys=tuple(f"{method}{path}{first + i}"
                                                                     for i in range(episodes)))


def test_units_on_the_same_episodes_form_one_bundle_and_the_largest_bundle_comes_first():
    units = [unit("fifo", "a", 0, 12), unit("mara", "b", 0, 128), unit("edf", "a", 0, 12), unit("fifo", "a", 12, 12),
             unit("lara", "b", 0, 128), unit("edf", "a", 12, 12), unit("mara", "a", 0, 13)]
    bundles = [[u.method + u.targets[0].path + str(u.targets[0].index) for u in bundle]
               for bundle in same_episodes(units)]
    assert bundles == [["marab0", "larab0"], ["fifoa0", "edfa0"], ["fifoa12", "edfa12"], ["maraa0"]]


def test_a_worker_keeps_its_bundle_and_an_idle_one_takes_from_the_end_of_the_longest():
    bundles = [[f"A{i}" for i in range(4)], [f"B{i}" for i in range(2)]]
    queue = BundleQueue(bundles, workers=2)
    order = [queue.next_for(0), queue.next_for(1), queue.next_for(1), queue.next_for(1), queue.next_for(0),
             queue.next_for(1), queue.next_for(0)]
    assert order == ["A0", "B0", "B1", "A3", "A1", "A2", None]  # worker 1 took A3 once B was done
    assert queue.next_for(1) is None
