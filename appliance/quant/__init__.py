"""`appliance quantize`: GGUF quantization calibrated on the team's documents, with a quality gate.

`types` (names, policy), `calib` (text), `imatrix` (importance matrix), `quantize` (the llama.cpp
call), `quality` (held-out PPL/KLD/top-1), `pipeline` (all of it for one or many candidates).
"""
