"""Deterministic cluster simulation: random scenarios, faults, and a checker.

workload.py makes and plays one scenario per seed on tests/unit/simnet.py's
network of real Node cores; checker.py watches the run and judges it;
run.py runs seeds (one, or thousands across processes) and reports
failures with a replayable seed and a short trace.
"""
