"""A kube-scheduler stand-in for the embedded cluster (see scheduler.py)."""
