"""Speed benchmarks: scripts that print figures (``docs/research/performance.md``), not part of what users install.

Run each from the repository root as ``python -m benchmarks.NAME --help``:

* :mod:`benchmarks.env_bench` — environment throughput (``make bench``); :mod:`benchmarks.env_bench_compare`
  the same figures for this checkout against another; :mod:`benchmarks.render_bench` time per rendered frame.
* :mod:`benchmarks.mat_bench` — MAT training throughput; :mod:`benchmarks.decode_bench` greedy decoding latency.
* :mod:`benchmarks.fm_throughput` — FM inference throughput at its callers' batch sizes.
* :mod:`benchmarks.profile_evaluation` — where an evaluation's time and memory go.
"""
