"""Reproducible measurements of the mesh (python -m bench.<area>); results go to bench/results/."""
