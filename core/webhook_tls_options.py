"""Where the webhooks' certificate is kept and for which names (core/webhook_tls.py does the
keeping); free of heavy imports, as the flags that build it are parsed before anything starts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Options:
    namespace: str = "vulcan-system"
    service: str = "vulcan-webhooks"
    secret: str = "vulcan-webhook-tls"  # the Secret cert-manager's Certificate writes too
    configuration: str = "vulcan-admission"
    # Ten years, not the 398/825 days of publicly trusted certificates: those limits are
    # browsers' (CA/Browser Forum, Apple) and kube-apiserver enforces none. The Job renews only
    # when it runs again, and once expired the webhooks, which fail closed, refuse every
    # Volcano write (the extender's --manage-webhook-certs renews on its own, and asks less).
    valid_days: int = 3650
    renew_before_days: int = 30
    wait: float = 120.0
    extra_hosts: tuple[str, ...] = ()  # more names or IPs (a webhook URL off the cluster)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The names a client may dial the Service by; the API server uses the first."""
        svc = f"{self.service}.{self.namespace}.svc"
        names = (svc, f"{svc}.cluster.local", self.service, f"{self.service}.{self.namespace}")
        return names + tuple(h for h in self.extra_hosts if h not in names)
