"""`wavecast calibrate`: benchmarks a GPU with the user's torch and writes a calibration file
(docs/calibration.md). cases.json lists what it measures; timing.py how; suite.py runs them."""
