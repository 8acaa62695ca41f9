"""What tests/unit/test_docs.py checks in README.md and docs/: relative links resolve (the file,
and for `#anchor` a heading of it), and every `vulcan ...` / `vcctl ...` command the docs name
(in code blocks and inline code) has its subcommands and flags in the command's own argparse
parser. Each problem is one line naming the doc, the line and what is wrong.

Commands are read from ```console blocks (lines after `$ `), ```sh/```bash blocks (every line)
and inline code that starts with `vulcan ` or `vcctl `; inline code that is only a flag
(`--gang-timeout`) must be a flag of some vulcan or vcctl command (name another tool's flag with
its command: `kubectl apply --server-side`). In inline code `a|b` (or `a\\|b` in a table) is
"a or b". Words in capitals (NAME, FILE) are placeholders and end what can be checked.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SHELL_BLOCKS = frozenset({"sh", "bash", "shell", "zsh"})
SESSION_BLOCKS = frozenset({"console", "shell-session"})
ALTERNATIVE = "\x00"  # stands for "|" between alternatives inside one word
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")  # a block quote's markers: its code blocks count too
# Inline code: within one paragraph (no blank line inside).
_INLINE = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n\s*\n).)+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FLAG = re.compile(r"^--?[A-Za-z][\w-]*\*?$")
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", "<", ">", ">>", "2>", "2>&1"})


@dataclass(frozen=True, slots=True)
class Problem:
    doc: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


@dataclass(frozen=True, slots=True)
class Command:
    line: int
    text: str  # as written, for the message
    words: list[str]


# ---------------------------------------------------------------------------------- reading


def split_blocks(text: str) -> tuple[list[tuple[int, str, list[str]]], str]:
    """The fenced code blocks (first line number, language, lines) and the prose with every
    block's lines blanked (so that offsets still give line numbers)."""
    blocks: list[tuple[int, str, list[str]]] = []
    prose: list[str] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        bare = _QUOTE.sub("", line)
        match = _FENCE.match(bare)
        if fence is None and match:
            fence = match.group(2)
            blocks.append((number + 1, match.group(3).lower(), []))
            prose.append("")
        elif fence is not None:
            if bare.strip().startswith(fence[0] * len(fence)) and not bare.strip().strip(fence[0]):
                fence = None
            else:
                blocks[-1][2].append(bare)
            prose.append("")
        else:
            prose.append(line)
    return blocks, "\n".join(prose)


def _joined(lines: list[str], first: int) -> Iterator[tuple[int, str]]:
    """Lines with their `\\` continuations joined, and the line each starts on."""
    pending, start = "", first
    for offset, line in enumerate(lines):
        if not pending:
            start = first + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def commands(text: str) -> Iterator[Command]:
    """Every vulcan or vcctl command line the doc shows, in blocks and inline code."""
    blocks, prose = split_blocks(text)
    for first, language, lines in blocks:
        if language not in SHELL_BLOCKS | SESSION_BLOCKS:
            continue
        for number, line in _joined(lines, first):
            stripped = line.strip()
            if language in SESSION_BLOCKS:
                if not stripped.startswith("$ "):
                    continue
                stripped = stripped[2:]
            yield from _commands_of(number, stripped, inline=False)
    for match in _INLINE.finditer(prose):
        number = prose.count("\n", 0, match.start()) + 1
        code = " ".join(match.group(2).split())
        if code.startswith(("vulcan ", "vcctl ")) or code in ("vulcan", "vcctl"):
            yield from _commands_of(number, code, inline=True)


def inline_flags(text: str) -> Iterator[tuple[int, str]]:
    """Inline code that is a flag alone (`--gang-timeout`, `--pod-duration 10s`)."""
    _, prose = split_blocks(text)
    for match in _INLINE.finditer(prose):
        code = match.group(2).strip()
        first = code.split()[0] if code.split() else ""
        flag = first.split("=", 1)[0]
        if _FLAG.match(flag):
            yield prose.count("\n", 0, match.start()) + 1, flag


def _commands_of(number: int, line: str, *, inline: bool) -> Iterator[Command]:
    if inline:  # no pipelines in inline code: every | separates alternatives
        line = line.replace("\\|", ALTERNATIVE).replace("|", ALTERNATIVE)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: take the words as they come
        words = line.split()
    segment: list[str] = []
    for word in [*words, ";"]:
        if word in _SEPARATORS:
            if segment:
                command = _as_command(segment)
                if command is not None:
                    yield Command(number, line.replace(ALTERNATIVE, "|"), command)
            segment = []
        else:
            segment.append(word)


def _as_command(words: list[str]) -> list[str] | None:
    """`vulcan ...` or `vcctl ...` (after env assignments, sudo, a path or `python -m`)."""
    while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("sudo", "exec")):
        words = words[1:]
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1] == "-m":
        words = words[2:]
    if words and Path(words[0]).name in ("vulcan", "vcctl"):
        return [Path(words[0]).name, *words[1:]]
    return None


# ------------------------------------------------------------------------------- checking


def _is_placeholder(word: str) -> bool:
    """NAME, FILE, <name>, ...: a stand-in the reader fills in."""
    bare = word.strip("[]{}()<>.'\"")
    return not bare or bare.isupper() or word.startswith("<") or bare in ("...", "…")


def _subparsers(parser: argparse.ArgumentParser) -> Mapping[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def every_flag(parsers: Mapping[str, argparse.ArgumentParser]) -> set[str]:
    """Every option string of every command and subcommand."""
    found: set[str] = set()
    todo = list(parsers.values())
    while todo:
        parser = todo.pop()
        found |= set(_options(parser))
        todo += list(_subparsers(parser).values())
    return found


def check_command(command: Command, parsers: Mapping[str, argparse.ArgumentParser]) -> list[str]:
    """What in `command` its parser does not know (empty: all of it is known)."""
    parser = parsers[command.words[0]]
    path = [command.words[0]]
    words = [w.strip("[]").strip(ALTERNATIVE) for w in command.words[1:]]
    words = [w for w in words if w]
    position = 0  # the positional argument reached (of a command without subcommands)
    problems: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.startswith("-") and len(word) > 1 and not word[1].isdigit():
            for flag in word.split(ALTERNATIVE):
                name = flag.split("=", 1)[0]
                options = _options(parser)
                action = options.get(name)
                if name.endswith("*") and any(o.startswith(name[:-1]) for o in options):
                    continue
                if action is None:
                    known = ", ".join(sorted(o for o in options if o.startswith("--")))
                    problems.append(
                        f"`{' '.join(path)}` has no flag {name} (its flags: {known or 'none'})"
                    )
                    continue
                takes_value = action.nargs != 0 and "=" not in flag
                if (
                    takes_value
                    and i < len(words)
                    and (action.nargs != "?" or not words[i].startswith("-"))
                ):
                    value = words[i]
                    i += 1
                    if action.choices and not _is_placeholder(value):
                        for choice in value.split(ALTERNATIVE):
                            if choice not in action.choices:
                                problems.append(
                                    f"`{' '.join(path)} {name}` has no value {choice!r} "
                                    f"(its values: {', '.join(map(str, action.choices))})"
                                )
            continue
        subcommands = _subparsers(parser)
        if not subcommands:
            position = _check_positional(parser, path, position, word, problems)
            continue
        if _is_placeholder(word):
            break
        choices = word.split(ALTERNATIVE)
        unknown = [c for c in choices if c not in subcommands]
        if unknown:
            problems.append(
                f"`{' '.join(path)}` has no subcommand {', '.join(unknown)} "
                f"(its subcommands: {', '.join(sorted(subcommands))})"
            )
            break
        parser = subcommands[choices[0]]
        path.append(choices[0])
    return problems


def _check_positional(
    parser: argparse.ArgumentParser, path: list[str], position: int, word: str, problems: list[str]
) -> int:
    """A positional argument: checked when it has choices (`vulcan demo gang`); returns the
    position of the next one."""
    positionals = [a for a in parser._actions if not a.option_strings]
    if position >= len(positionals):
        return position
    action = positionals[position]
    if action.choices and not _is_placeholder(word):
        unknown = [c for c in word.split(ALTERNATIVE) if c not in action.choices]
        if unknown:
            problems.append(
                f"`{' '.join(path)}` has no {action.dest} {', '.join(unknown)} "
                f"(its choices: {', '.join(map(str, action.choices))})"
            )
    return position if action.nargs in ("+", "*") else position + 1


def check_doc(doc: str, text: str, parsers: Mapping[str, argparse.ArgumentParser]) -> list[Problem]:
    """Every command and lone flag of one doc that the parsers do not know."""
    problems = [
        Problem(doc, command.line, f"{command.text!r}: {text_}")
        for command in commands(text)
        for text_ in check_command(command, parsers)
    ]
    flags = every_flag(parsers)
    for number, flag in inline_flags(text):
        prefix = flag[:-1] if flag.endswith("*") else None
        known = any(f.startswith(prefix) for f in flags) if prefix else flag in flags
        if not known:
            problems.append(
                Problem(
                    doc,
                    number,
                    f"`{flag}` is no flag of any vulcan or vcctl command "
                    "(another tool's flag: write it with its command)",
                )
            )
    return sorted(problems, key=lambda p: p.line)


# ---------------------------------------------------------------------------------- links


def slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, and
    -1, -2, ... after repeats."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*~]|<[^>]+>", "", text).strip().lower()
    base = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
    count = seen.get(base, 0)
    seen[base] = count + 1
    return base if count == 0 else f"{base}-{count}"


def anchors(text: str) -> set[str]:
    _, prose = split_blocks(text)
    seen: dict[str, int] = {}
    found = set()
    for line in prose.splitlines():
        match = _HEADING.match(line)
        if match:
            found.add(slug(match.group(2), seen))
    found |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", prose))
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    """Relative link targets in the prose (not in code), with their line."""
    _, prose = split_blocks(text)
    prose = _INLINE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    for match in _LINK.finditer(prose):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:
        yield prose.count("\n", 0, match.start()) + 1, target


def check_links(path: Path, root: Path) -> list[Problem]:
    doc = str(path.relative_to(root))
    text = path.read_text()
    problems = []
    for number, target in links(text):
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.is_relative_to(root.resolve()):
            problems.append(Problem(doc, number, f"link {target}: outside the repository"))
            continue
        if not resolved.exists():
            problems.append(Problem(doc, number, f"link {target}: no such file"))
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            where = resolved.relative_to(root.resolve())
            problems.append(Problem(doc, number, f"link {target}: no heading #{anchor} in {where}"))
    return problems
