"""Where the webhooks' certificate is kept and for which names (core/webhook_tls.py does the
keeping); free of heavy imports, as the flags that build it are parsed before anything starts."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any


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


def add_place_flags(parser: Any, prefix: str = "", pod_namespace: bool = False) -> None:
    """Where the certificate is kept and for which Service: `--{prefix}namespace`,
    `--{prefix}service`, `--{prefix}secret` and `--webhook-configuration` (`parser` may be an
    argument group). `pod_namespace`: the namespace defaults to $POD_NAMESPACE when set (the
    Deployment's own)."""
    defaults = Options()
    env = os.environ.get("POD_NAMESPACE") if pod_namespace else None
    parser.add_argument(
        f"--{prefix}namespace",
        default=env or defaults.namespace,
        help="namespace of the webhooks' Service and Secret (default "
        + ("$POD_NAMESPACE, else " if pod_namespace else "")
        + f"{defaults.namespace})",
    )
    parser.add_argument(
        f"--{prefix}service",
        default=defaults.service,
        help="the Service the API server calls the webhooks through (default %(default)s)",
    )
    parser.add_argument(
        f"--{prefix}secret",
        default=defaults.secret,
        help="the kubernetes.io/tls Secret the certificate is kept in (default %(default)s)",
    )
    parser.add_argument(
        "--webhook-configuration",
        default=defaults.configuration,
        help="name of the Mutating- and ValidatingWebhookConfiguration (default %(default)s)",
    )


def place_of(args: argparse.Namespace, prefix: str = "") -> dict[str, str]:
    """The `Options` fields `add_place_flags(prefix=prefix)` parsed."""
    key = prefix.replace("-", "_")
    return {
        "namespace": getattr(args, f"{key}namespace"),
        "service": getattr(args, f"{key}service"),
        "secret": getattr(args, f"{key}secret"),
        "configuration": args.webhook_configuration,
    }
