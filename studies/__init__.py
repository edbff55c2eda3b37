"""Studies behind the docs: commands that measure a question about the project, not part of what users install.

Run each from the repository root as ``python -m studies.NAME --help``:

* :mod:`studies.data_curve` — how much more training data buys (``docs/research/data_curve.md``).
* :mod:`studies.curve_scores` — predictor accuracy on chosen curves, with CIs over curves.
* :mod:`studies.learning_curve` — validation success against env steps, from a run's snapshots.
* :mod:`studies.extension_selection` — choosing the node settings beyond the paper (``docs/research/extensions.md``).
* :mod:`studies.workload_report` — whether a workload separates the allocators (``docs/research/workloads_rules.md``).
"""
