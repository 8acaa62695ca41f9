"""Size limits on the lists and strings that CRD validation rules (CEL) walk.

kube-apiserver refuses a CRD whose `x-kubernetes-validations` rules it cannot bound: it estimates
each rule's worst-case cost from the `maxItems`/`maxLength` of what the rule walks (falling back to
"as many as fit in a 3 MiB request" when a bound is missing) and multiplies it by how many times
the rule can run (the product of the bounds of the enclosing arrays). Without bounds our Job,
JobTemplate and JobFlow CRDs were refused ("estimated rule cost exceeds budget by factor of more
than 100x"). These limits are far above anything a Volcano user writes (Volcano's own examples
use 1-4 tasks and flows of a handful of steps), so they only bound the estimate; pydantic enforces
the same limits, so `vulcan validate`, the webhooks and the API server agree on what is too big.
"""

from __future__ import annotations

MAX_TASKS = 128
"""`spec.tasks` of a Job (and of a JobTemplate): a task is a role (master, worker, ps, chief...),
not a replica; Volcano's examples and the training operators use at most a handful."""

MAX_TASK_NAME = 63
"""A task name becomes part of pod names and the `volcano.sh/task-spec` label value: a DNS-1123
label, 63 characters (unchanged; Volcano's webhook checks the same)."""

MAX_FLOWS = 128
"""`spec.flows` of a JobFlow: each step is a whole Job; a pipeline of 128 jobs is far beyond the
DAGs Volcano documents."""

MAX_FLOW_NAME = 253
"""A flow names a JobTemplate (an object name: a DNS-1123 subdomain, at most 253)."""

MAX_FLOW_TARGETS = 128
"""`dependsOn.targets` of one flow: at most every other flow (MAX_FLOWS)."""
