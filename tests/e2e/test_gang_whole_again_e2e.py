"""All-or-nothing after a gang loses its members (issue 31), end to end: `vulcan sim up` with the
extender and the controllers, Volcano Job YAML created with kubectl.

1. A running Volcano Job evicted whole by reclaim has its pods made again by the job controller.
   Its next placement is whole or nothing: the room left over fits half of it, and none of it
   may bind (before the fix half of it bound at once, one pod at a time: the gang's bind barrier
   still said "committed" from the first run and the extender still counted it admitted).
   Once the reclaimer goes, it runs again whole (before the fix its refusal by the overcommit
   rule stood until its own PodGroup changed, so it waited for ever).
2. Volcano's example/task-start-dependency, in our own words: tasks chained by `dependsOn`
   whose minAvailable is below the sum of the task minimums. The dependent tasks' pods are
   created only once the tasks they depend on run, so the bind barrier must not wait for them
   (Volcano skips the per-task checks then); every pod binds, no gang times out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, start_cluster, wait_for

NODE_CPU = 8


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path,
        "--nodes",
        "2",
        "--node-profile",
        f"cpu={NODE_CPU},memory=64Gi",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "forever",
    )


QUEUE_QA = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: qa
spec:
  weight: 1
  reclaimable: true
"""

# Four 4-cpu workers that must start together: exactly the two nodes' 16 cpu.
JOB_QA = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: qa-j1
spec:
  schedulerName: volcano
  queue: qa
  minAvailable: 4
  tasks:
    - replicas: 4
      name: worker
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: main
              image: busybox
              resources:
                requests: {cpu: "4", memory: 1Gi}
"""

# In queue default (weight 1, as qa): a PodGroup gang of four 2-cpu pods that deserves half the
# cluster and reclaims it from qa. (A Volcano Job here would wait Pending at enqueue, whose
# overcommit check counts qa's running 16 cpu: issue 31 item 3, not this test's subject.)
RECLAIMER = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: rq
spec:
  queue: default
  minMember: 4
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata:
  name: rq-{index}
  labels: {{app: rq}}
  annotations: {{scheduling.k8s.io/group-name: rq}}
spec:
  schedulerName: volcano
  containers:
    - name: main
      image: busybox
      resources:
        requests: {{cpu: "2", memory: 1Gi}}
"""
    for index in range(4)
)


def job_pods(cluster: SimCluster, job: str) -> list[dict[str, Any]]:
    return cluster.pods(selector=f"volcano.sh/job-name={job}")


def live_bound(pods: list[dict[str, Any]]) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in pods
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and p.get("status", {}).get("phase") != "Failed"
    ]


def podgroup_of(cluster: SimCluster, job: str) -> dict[str, Any]:
    groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
    return next(
        g
        for g in groups["items"]
        if any(o.get("name") == job for o in g["metadata"].get("ownerReferences") or ())
    )


def event_reasons(cluster: SimCluster, name: str) -> list[str]:
    return [e.get("reason", "") for e in cluster.events(name)]


def test_a_gang_evicted_whole_by_reclaim_comes_back_whole_or_not_at_all(
    cluster: SimCluster,
) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=QUEUE_QA)
    cluster.kubectl("create", "-f", "-", stdin=JOB_QA)
    first = wait_for(
        "qa-j1's four workers to run",
        lambda: (pods := live_bound(job_pods(cluster, "qa-j1"))) and len(pods) == 4 and pods,
        60,
    )
    old_uids = {p["metadata"]["uid"] for p in job_pods(cluster, "qa-j1")}
    cluster.kubectl("create", "-f", "-", stdin=RECLAIMER)
    wait_for(
        "rq to run (reclaimed from qa)",
        lambda: len(live_bound(cluster.pods(selector="app=rq"))) == 4,
        60,
    )
    # qa-j1 was evicted whole: none of its old pods is left. Its PodGroup, with nothing
    # allocated, goes back to Pending (Volcano's jobStatus at session close), so its job
    # controller makes again only the pods it made before that (Volcano creates pods only for a
    # PodGroup past Pending): some, all or none of them, by timing.
    wait_for(
        "qa-j1's old pods to be gone",
        lambda: not {p["metadata"]["uid"] for p in job_pods(cluster, "qa-j1")} & old_uids,
        60,
    )
    # 8 cpu are left: room for two of its four 4-cpu workers. None may bind: sample for a
    # while (long enough for kube-scheduler to try each of them several times).
    deadline = time.monotonic() + 12
    worst: list[str] = []
    while time.monotonic() < deadline:
        bound = live_bound(job_pods(cluster, "qa-j1"))
        if len(bound) > len(worst):
            worst = bound
        time.sleep(0.1)
    assert worst == [], f"qa-j1 partly bound after its eviction: {worst} (before: {first})"
    group = podgroup_of(cluster, "qa-j1")
    status = group.get("status") or {}
    # Nothing of it runs: Volcano shows such a gang Pending (or Inqueue), never Unknown.
    assert status.get("phase") in ("Pending", "Inqueue"), status
    # The PodGroup says what happened: the gang lost its members and starts over whole.
    reasons = event_reasons(cluster, group["metadata"]["name"])
    assert "GangBroken" in reasons, reasons
    broken = next(
        e for e in cluster.events(group["metadata"]["name"]) if e.get("reason") == "GangBroken"
    )
    assert "all-or-nothing" in broken.get("note", ""), broken
    # What holds it is the gang's own reason (not only kube-scheduler's fit), on the PodGroup
    # and on whichever of its pods were made again.
    unschedulable = [
        c.get("message", "")
        for c in status.get("conditions") or ()
        if c.get("type") == "Unschedulable" and c.get("status") == "True"
    ]
    assert any(f"gang {group['metadata']['namespace']}/" in m for m in unschedulable), status
    # Its pods are made again behind the queue-allocation gate (kube-scheduler does not try
    # them: PodScheduled says SchedulingGated), or, if tried, were refused for the gang.
    tried: list[dict[str, Any]] = []
    for pod in job_pods(cluster, "qa-j1"):
        (scheduled,) = [
            c for c in pod.get("status", {}).get("conditions") or () if c["type"] == "PodScheduled"
        ] or [{}]
        if scheduled.get("reason") == "SchedulingGated":
            # Still gated: kube-scheduler never tried it, so it has no FailedScheduling event.
            assert pod["spec"].get("schedulingGates"), pod
            continue
        assert "gang default/" in scheduled.get("message", ""), pod
        tried.append(pod)
    # A pod kube-scheduler did try was told why, in an event that names the gang.
    told = [
        e.get("note", "")
        for pod in tried
        for e in cluster.events(pod["metadata"]["name"])
        if e.get("reason") == "FailedScheduling"
    ]
    assert not tried or any("gang default/" in note for note in told), told
    # The reclaimer goes: qa-j1 is enqueued again (its refusal, by the overcommit rule that
    # counted rq's pods, is judged again), its four pods run whole.
    cluster.kubectl("delete", "podgroup", "rq", "--wait=false")
    cluster.kubectl("delete", "pod", "-l", "app=rq", "--wait=false")
    again = wait_for(
        "qa-j1's four new workers to run",
        lambda: (pods := live_bound(job_pods(cluster, "qa-j1"))) and len(pods) == 4 and pods,
        60,
    )
    uids = {
        p["metadata"]["uid"] for p in job_pods(cluster, "qa-j1") if p["metadata"]["name"] in again
    }
    assert not uids & old_uids, again


# Volcano's example/task-start-dependency/job.yaml, in our words: one task of 1, then one of 5
# that starts once the first runs, then one of 5 after that; minAvailable 1.
CHAINED_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: chained
spec:
  schedulerName: volcano
  queue: default
  minAvailable: 1
  tasks:
    - replicas: 1
      name: first
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: web, image: nginx, resources: {requests: {cpu: 100m}}}
    - replicas: 5
      name: second
      dependsOn:
        name: [first]
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: web, image: nginx, resources: {requests: {cpu: 100m}}}
    - replicas: 5
      name: third
      dependsOn:
        name: [second]
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: web, image: nginx, resources: {requests: {cpu: 100m}}}
"""

# .../mpi.yaml, in our words: a launcher that starts once its 10 workers run; minAvailable 3.
LAUNCHER_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: launcher-mpi
spec:
  schedulerName: volcano
  minAvailable: 3
  plugins:
    ssh: []
    svc: []
  tasks:
    - replicas: 1
      name: launcher
      policies:
        - {event: TaskCompleted, action: CompleteJob}
      dependsOn:
        name: [worker]
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: launcher, image: example/mpi, resources: {requests: {cpu: 200m}}}
    - replicas: 10
      name: worker
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: worker, image: example/mpi, resources: {requests: {cpu: 200m}}}
"""


@pytest.mark.parametrize(("manifest", "job", "pods"), [(CHAINED_JOB, "chained", 11)])
def test_task_start_dependency_jobs_run_every_pod_without_a_gang_timeout(
    cluster: SimCluster, manifest: str, job: str, pods: int
) -> None:
    _runs_whole(cluster, manifest, job, pods)


def test_a_launcher_that_depends_on_its_workers_starts_after_them(cluster: SimCluster) -> None:
    _runs_whole(cluster, LAUNCHER_JOB, "launcher-mpi", 11)
    # The launcher was made (and bound) only after the workers ran.
    pods = {p["metadata"]["name"]: p for p in job_pods(cluster, "launcher-mpi")}
    launcher = pods["launcher-mpi-launcher-0"]["metadata"]["creationTimestamp"]
    workers = [p["metadata"]["creationTimestamp"] for n, p in pods.items() if "-worker-" in n]
    assert launcher >= max(workers)


def _runs_whole(cluster: SimCluster, manifest: str, job: str, pods: int) -> None:
    cluster.kubectl("create", "-f", "-", stdin=manifest)
    assert yaml.safe_load(manifest)["metadata"]["name"] == job
    wait_for(
        f"all {pods} pods of {job} to be bound",
        lambda: len(live_bound(job_pods(cluster, job))) == pods,
        40,
    )
    group = podgroup_of(cluster, job)
    reasons = event_reasons(cluster, group["metadata"]["name"])
    assert "GangTimedOut" not in reasons, reasons
    for pod in job_pods(cluster, job):
        assert "GangTimedOut" not in event_reasons(cluster, pod["metadata"]["name"])


# minAvailable 2 = t0's replicas; t1 starts once t0 runs. Each task keeps to its own nodes
# (`pool`), so the test decides where room shows up.
CHAINED_FINISHED_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: chain
spec:
  schedulerName: volcano
  queue: default
  minAvailable: 2
  tasks:
    - replicas: 2
      name: t0
      template:
        metadata:
          annotations: {vulcan.sh/sim-duration: 1s}
        spec:
          restartPolicy: Never
          nodeSelector: {pool: a}
          containers:
            - {name: main, image: busybox, resources: {requests: {cpu: "2", memory: 1Gi}}}
    - replicas: 3
      name: t1
      dependsOn:
        name: [t0]
      template:
        spec:
          restartPolicy: OnFailure
          nodeSelector: {pool: b}
          containers:
            - {name: main, image: busybox, resources: {requests: {cpu: "6", memory: 1Gi}}}
"""


def test_a_chained_job_whose_finished_task_is_deleted_binds_its_next_task_whole(
    cluster: SimCluster,
) -> None:
    chained_finished_task_scenario(cluster)


def chained_finished_task_scenario(cluster: SimCluster) -> None:
    """While t0's two Succeeded pods exist they make the quorum (Volcano's ReadyTaskNum), so t1's
    members may bind one at a time. A failed node's taint eviction deletes finished pods too:
    then t1 waits whole again (the soak found one t1 pod bound alone on a real control plane).
    Shared by the embedded and the real tier (nodes of 8 cpu)."""
    nodes = sorted(n["metadata"]["name"] for n in cluster.get("/api/v1/nodes")["items"])
    cluster.kubectl("label", "node", nodes[0], "pool=a")
    cluster.kubectl("create", "-f", "-", stdin=CHAINED_FINISHED_JOB)
    finished = wait_for(
        "t0's two pods to succeed and t1's pods to be made",
        lambda: (
            (pods := job_pods(cluster, "chain"))
            and sum(p.get("status", {}).get("phase") == "Succeeded" for p in pods) == 2
            and sum("-t1-" in p["metadata"]["name"] for p in pods) == 3
            and [p["metadata"]["name"] for p in pods if "-t0-" in p["metadata"]["name"]]
        ),
        40,
    )
    old_uids = {p["metadata"]["uid"] for p in job_pods(cluster, "chain")}
    cluster.kubectl("label", "node", nodes[0], "pool-")  # t0's pods made again cannot bind
    cluster.kubectl("delete", "pod", *finished, "--wait=false")
    wait_for(
        "t0's finished pods to be gone",
        lambda: (
            not any(
                p["metadata"]["uid"] in old_uids and p["metadata"]["name"] in finished
                for p in job_pods(cluster, "chain")
            )
        ),
        30,
    )
    # Room for one 6-cpu member of t1 (8 cpu): it must not bind alone.
    cluster.kubectl("label", "node", nodes[0], "pool=b")
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        bound = live_bound(job_pods(cluster, "chain"))
        assert bound == [], f"chain partly bound after its finished task was deleted: {bound}"
        time.sleep(0.1)
    group = podgroup_of(cluster, "chain")["metadata"]["name"]
    broken = [e for e in cluster.events(group) if e.get("reason") == "GangBroken"]
    assert broken and "finished member" in broken[0].get("note", ""), broken
    # Room for a second one: the two bind together.
    cluster.kubectl("label", "node", nodes[1], "pool=b")
    wait_for(
        "two of t1's members to run", lambda: len(live_bound(job_pods(cluster, "chain"))) == 2, 40
    )


# ------------------------------------------------------------------------------ the queue scenario


def _queue(name: str, weight: int) -> str:
    return (
        f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: {name}\n"
        f"spec:\n  weight: {weight}\n  reclaimable: true\n"
    )


def _job(name: str, queue: str, durations: tuple[int, int]) -> str:
    """A Volcano Job of 4 pods x 4 cpu, minAvailable 4, in two tasks of 2 that run for
    different times: its room comes back in pieces, as jobs of a real cluster give it back."""
    tasks = "".join(
        f"""
    - replicas: 2
      name: t{index}
      template:
        metadata:
          annotations: {{vulcan.sh/sim-duration: {seconds}s}}
        spec:
          restartPolicy: OnFailure
          containers:
            - {{name: main, image: busybox, resources: {{requests: {{cpu: "4", memory: 1Gi}}}}}}"""
        for index, seconds in enumerate(durations)
    )
    return f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: {name}
spec:
  schedulerName: volcano
  queue: {queue}
  minAvailable: 4
  tasks:{tasks}
"""


@pytest.fixture
def big_cluster(tmp_path: Path) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path,
        "--nodes",
        "4",
        "--node-profile",
        "cpu=32,memory=128Gi",
        "--with-extender",
        "--with-controllers",
    )


PARTIAL_WINDOW = 2.0  # seconds a gang may be seen between its Bindings (they land one by one)


def test_the_queue_scenario_never_shows_a_partly_bound_job(big_cluster: SimCluster) -> None:
    """Issue 31's scenario: queues qa (1) and qb (3), sixteen 4 x 4-cpu jobs, more jobs, then a
    gang in default that reclaims from qa; jobs evicted whole come back whole or not at all."""
    cluster = big_cluster
    cluster.kubectl("apply", "-f", "-", stdin="---\n".join([_queue("qa", 1), _queue("qb", 3)]))
    durations = [(20 + (i * 7) % 15, 25 + (i * 5) % 17) for i in range(24)]  # fixed, uneven

    def jobs_of(numbers: range) -> dict[str, str]:
        return {
            f"{q}-j{i}": _job(f"{q}-j{i}", q, durations[2 * i + (q == "qb")])
            for i in numbers
            for q in ("qa", "qb")
        }

    # qa's eight jobs first: it borrows the whole cluster; then qb's, which reclaim their share
    # (qb deserves 3/4) from qa by evicting qa's jobs whole.
    first = jobs_of(range(8))
    qa_first = [text for name, text in first.items() if name.startswith("qa-")]
    cluster.kubectl("create", "-f", "-", stdin="---\n".join(qa_first))
    jobs = set(first)
    partial_since: dict[str, float] = {}
    worst: dict[str, float] = {}
    evicted: set[str] = set()
    uids: dict[str, str] = {}

    def sample() -> None:
        now = time.monotonic()
        per_job: dict[str, list[dict[str, Any]]] = {}
        for pod in cluster.pods(selector="volcano.sh/job-name"):
            per_job.setdefault(pod["metadata"]["labels"]["volcano.sh/job-name"], []).append(pod)
        for job in jobs:
            pods = per_job.get(job, [])
            bound = len(live_bound(pods))
            for pod in pods:
                # Evicted and made again: the same name with a new UID.
                meta = pod["metadata"]
                if uids.setdefault(meta["name"], meta["uid"]) != meta["uid"]:
                    evicted.add(job)
            if 0 < bound < 4:
                since = partial_since.setdefault(job, now)
                worst[job] = max(worst.get(job, 0.0), now - since)
            else:
                partial_since.pop(job, None)

    def run_for(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sample()
            time.sleep(0.2)

    run_for(5)
    qb_first = [text for name, text in first.items() if name.startswith("qb-")]
    cluster.kubectl("create", "-f", "-", stdin="---\n".join(qb_first))
    run_for(8)
    more = jobs_of(range(8, 12))
    cluster.kubectl("create", "-f", "-", stdin="---\n".join(more.values()))
    jobs |= set(more)
    run_for(4)
    reclaimer = RECLAIMER.replace('cpu: "2"', 'cpu: "4"')
    cluster.kubectl("create", "-f", "-", stdin=reclaimer)
    run_for(35)
    too_long = {job: round(s, 1) for job, s in worst.items() if s > PARTIAL_WINDOW}
    print(f"\nqueue scenario: evicted jobs {sorted(evicted)}, worst partial {worst}")
    assert not too_long, f"jobs partly bound longer than {PARTIAL_WINDOW}s: {too_long}"
    assert evicted, "the reclaim evicted no job: the scenario did not happen"
