"""Deployment and scale-out: Triton model repository and launcher, manifests, dashboards."""
