"""The README and the manual in docs/ say only what is there: every relative link resolves
(file and heading), and every `vulcan ...` / `vcctl ...` command and flag they name is one the
commands' own parsers know (tests/docs_check.py says how they are read). The README stays a
quick start: at most 300 lines, with the test and demo commands CI and users run."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.docs_check import Problem, check_doc, check_links
from tests.helpers import REPO
from vcctl.cli import build_parser as vcctl_parser
from vulcan.cli import build_parser as vulcan_parser

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README_MAX_LINES = 300


def parsers() -> dict[str, argparse.ArgumentParser]:
    return {"vulcan": vulcan_parser(), "vcctl": vcctl_parser()}


def _report(problems: list[Problem]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(map(str, problems))


def test_the_manual_exists() -> None:
    names = {p.name for p in DOCS}
    for page in ("install.md", "concepts.md", "operations.md", "troubleshooting.md"):
        assert page in names
    assert "reference.md" in names and "architecture.md" in names


def test_every_relative_link_resolves_to_a_file_and_heading() -> None:
    problems = [p for doc in DOCS for p in check_links(doc, REPO)]
    assert not problems, _report(problems)


def test_every_command_and_flag_the_docs_name_exists() -> None:
    known = parsers()
    problems = [
        p for doc in DOCS for p in check_doc(str(doc.relative_to(REPO)), doc.read_text(), known)
    ]
    assert not problems, _report(problems)


def test_readme_is_a_quick_start_with_the_test_and_demo_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    # The test command (.ci/run runs it) and the demo, as the README gives them.
    assert "`make test`" in text and "`make demo`" in text
    assert "--with-controllers" in text  # Volcano Jobs run only with the controllers


# ------------------------------------------------------------------- the checker catches


TYPOS = """# Try it

```console
$ vulcan sim up --nodes 4 --with-controlers
embedded API server: http://127.0.0.1:1
$ vcctl job lst
$ kubectl get pods --watch-only | vulcan explan pod x
```

Run `vulcan timeline --lanes racks -o x.png` or `vcctl queue operate -a open\\|close -n q`;
the extender's `--gang-timout` and kubectl's `kubectl apply --server-side` (not checked).

```sh
vulcan extender \\
    --port 8888 --gang-timeout=60s --no-such
```

See [the manual](docs/nowhere.md), [a heading](#try-it) and [another](#nothing-here).

> A quoted block is read too:
>
> ```console
> $ vulcan demo gangs
> ```
"""


def test_the_checker_names_the_doc_line_and_unknown_command_or_flag(tmp_path: Path) -> None:
    problems = [str(p) for p in check_doc("GUIDE.md", TYPOS, parsers())]
    expected = [
        (4, "`vulcan sim up` has no flag --with-controlers (its flags: --control-plane"),
        (6, "`vcctl job` has no subcommand lst (its subcommands: delete, explain"),
        (7, "`vulcan` has no subcommand explan (its subcommands: controllers, crds"),
        (10, "`vulcan timeline --lanes` has no value 'racks' (its values: nodes, queues)"),
        (11, "`--gang-timout` is no flag of any vulcan or vcctl command"),
        (14, "`vulcan extender` has no flag --no-such (its flags: --bind-address"),
        (23, "`vulcan demo` has no which gangs (its choices: gang, job, flow, extender)"),
    ]
    assert len(problems) == len(expected), problems  # the rest is right, or another tool's
    for problem, (line, text) in zip(problems, expected, strict=True):
        assert problem.startswith(f"GUIDE.md:{line}: "), problem
        assert text in problem, problem

    doc = tmp_path / "GUIDE.md"
    doc.write_text(TYPOS)
    broken = [str(p) for p in check_links(doc, tmp_path)]
    assert broken == [
        "GUIDE.md:18: link docs/nowhere.md: no such file",
        "GUIDE.md:18: link #nothing-here: no heading #nothing-here in GUIDE.md",
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Install on a cluster", "install-on-a-cluster"),
        ("Why is my job pending? `vulcan explain`", "why-is-my-job-pending-vulcan-explain"),
        ("Gangs, queues & Jobs", "gangs-queues--jobs"),
        ("A whole cluster: `vulcan sim up`", "a-whole-cluster-vulcan-sim-up"),
    ],
)
def test_anchors_are_githubs(heading: str, anchor: str) -> None:
    from tests.docs_check import slug

    assert slug(heading, {}) == anchor
