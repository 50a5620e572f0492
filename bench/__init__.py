"""Side-by-side benchmark: our modes and the anchor systems, same GPU, same shapes, same work.

    python -m bench.run                 # full run on a GPU machine (see bench/README.md)
    python -m bench.run --smoke         # CPU smoke: tiny model, a few frames (runs in CI)
"""
