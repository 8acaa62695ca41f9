"""Label and field selectors as the Kubernetes API server parses and evaluates them.

- Label selectors: k8s.io/apimachinery/pkg/labels/selector.go (`Parse`, `Requirement.Matches`),
  plus metav1 `LabelSelectorAsSelector` for the structured `{matchLabels, matchExpressions}` form
  and `SelectorFromSet` for a plain map (Service and ReplicationController selectors).
- Field selectors: k8s.io/apimachinery/pkg/fields/selector.go (`ParseSelector`).

Parsing happens once per request; matching runs for every object of a list (100,000 pods) and for
every watch event of every watcher, so a parsed selector is precompiled into tuples of plain
values and matching does nothing but dict lookups and comparisons.

This module is the front: label selectors and their matching are in
`sim.apiserver.selector_labels`, building them from text, from the structured form or from a map
in `sim.apiserver.selector_label_parsing`, field selectors in `sim.apiserver.selector_fields`, and
what they share (the error, the operators, key and value validation) in
`sim.apiserver.selector_base`.
"""

from __future__ import annotations

from sim.apiserver.selector_base import Operator, SelectorError
from sim.apiserver.selector_fields import FieldRequirement, FieldSelector, parse_field_selector
from sim.apiserver.selector_label_parsing import (
    label_selector_from_dict,
    label_selector_from_set,
    parse_label_selector,
)
from sim.apiserver.selector_labels import LabelSelector, Requirement

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "label_selector_from_dict",
    "label_selector_from_set",
    "parse_field_selector",
    "parse_label_selector",
]
