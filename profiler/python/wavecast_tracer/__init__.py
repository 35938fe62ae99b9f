"""wavecast's tracer: records one training iteration of a user's script.

The worker (wavecast-worker) imports `wavecast_tracer.worker` and serves
requests; `python -m wavecast_tracer FILE` prints a trace for debugging.
"""
