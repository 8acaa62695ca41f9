"""Whose words a pod's scheduling refusal is: vulcan's filter names the gang in every refusal of
its own ("gang ns/g: ...", or "podgroup ns/g not found" before its cache had the group);
kube-scheduler's own refusals ("0/4 nodes are available: ...") name no gang. The extender
(has kube-scheduler turned a member away itself?) and `vulcan explain` (is a refusal stale?)
read them alike."""

from __future__ import annotations

__all__ = ["vulcan_refused"]


def vulcan_refused(message: str, gang: str) -> bool:
    """Whether `message` is a refusal of vulcan's about gang `gang` (ns/name)."""
    return (
        f"gang {gang}:" in message
        or f"gang {gang} " in message
        or f"podgroup {gang} not found" in message
    )
