"""vcctl: Volcano's command line (`vcctl` and the legacy `vsub`, `vjobs`, `vqueues`, `vcancel`,
`vsuspend`, `vresume`) for clusters running vulcan.

It speaks only to the API server (through `core.kube.client`), reading and writing Volcano's
objects as Volcano's vcctl does: Jobs, Commands for suspend/resume and queue open/close,
Queues, JobFlows, JobTemplates, PodGroups (to count them per queue) and pods. Module map:
`cli` (command tree, errors), `legacy` (the single-purpose binaries), `kube` (connection,
namespace, one-line errors), `bus` (Commands), `jobs`, `job_view`, `queues`, `flows`, `pods`,
`output` (Go-style padding, ages, timestamps).

Where Volcano's code and its documentation (or obvious intent) disagree, the module docstrings
say which was followed. The one that touches every command: `-n/--namespace`, when not given,
is the kubeconfig context's namespace (else the in-cluster one, else `default`), as kubectl
and PR volcano-sh/volcano#2596 do; Volcano's released vcctl always uses `default` (#2594). The
two agree whenever the context names no namespace.
"""
