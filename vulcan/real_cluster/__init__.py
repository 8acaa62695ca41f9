"""A real Kubernetes cluster on this machine with vulcan installed: `vulcan sim up
--control-plane real`, the real test tier and `bench.soak --real` start it with this package.

- `assets`: finding the binaries (--kube-assets, KUBEBUILDER_ASSETS, VULCAN_KUBE_ASSETS) and
  checking them against their SHA256SUMS;
- `processes`: child processes stopped by pid, restarted when they exit on their own;
- `control_plane`: etcd, kube-apiserver, kube-controller-manager;
- `manifests`: the install overlay rendered by kubectl kustomize, and what a local run reads
  out of it;
- `install`: vulcan installed on the control plane, its Deployments run as processes;
- `cluster`: all of it, started in order and stopped whatever happened;
- `up`: the `vulcan sim up --control-plane real` command.
"""
