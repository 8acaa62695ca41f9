"""Reading Kubernetes YAML the way kubectl does (multi-document, timestamps stay strings)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml


class _KubeYamlLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: Kubernetes keeps `2024-05-28T09:18:50Z` a
    string, and a datetime would not survive a JSON round trip."""


_KubeYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class ManifestError(ValueError):
    """The text is not YAML; the message says where."""


def load_documents(text: str) -> Iterator[tuple[int, Any]]:
    """Yield (document index, parsed document) for every non-empty document in `text`."""
    try:
        for index, doc in enumerate(yaml.load_all(text, Loader=_KubeYamlLoader)):
            if doc is not None:
                yield index, doc
    except yaml.YAMLError as exc:
        raise ManifestError(f"invalid YAML: {exc}".replace("\n", " ")) from None


def load_all(text: str) -> list[Any]:
    return [doc for _, doc in load_documents(text)]
