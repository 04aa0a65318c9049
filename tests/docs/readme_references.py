#!/usr/bin/env python3
"""Fails when a user-facing document names a make target, a script or a file that does not exist.

Checks README.md and docs/*.md: every `make TARGET` must be a target of the Makefile, and every
repository path they name (scripts/..., deploy/..., tests/..., bench/..., docs/..., runtime/...,
operator/..., contract/..., cmake/..., .ci/...) must exist. Paths with placeholders (<job>, $VAR,
globs, {a,b}) and paths under build/ (made by a build) are not checked.

Usage: readme_references.py REPO_ROOT
"""
import pathlib
import re
import sys

TOP_DIRS = ("scripts", "deploy", "tests", "bench", "docs", "runtime", "operator", "contract",
            "cmake", ".ci")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*[\w/])" % "|".join(re.escape(d) for d in TOP_DIRS))
MAKE = re.compile(r"(?<![\w-])make ([a-z][\w-]*)")
PLACEHOLDER = re.compile(r"[<>$*{}]")


def make_targets(makefile: pathlib.Path) -> set:
    targets = set()
    for line in makefile.read_text().splitlines():
        match = re.match(r"^([\w][\w .-]*?)\s*:(?!=)", line)
        if match:
            targets.update(match.group(1).split())
        if line.startswith(".PHONY:"):
            targets.update(line.split(":", 1)[1].split())
    return targets


def main() -> int:
    root = pathlib.Path(sys.argv[1]).resolve()
    targets = make_targets(root / "Makefile")
    documents = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    problems = []
    for document in documents:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            where = f"{document.relative_to(root)}:{number}"
            for target in MAKE.findall(line):
                # Prose such as "make sure" is not a command: only code spans and code blocks.
                if f"make {target}" in line and (target in targets or not is_code(line, target)):
                    continue
                problems.append(f"{where}: `make {target}`: no such target in the Makefile")
            for match in PATH.finditer(line):
                path, after = match.group(1), line[match.end():match.end() + 2]
                # operator/api/job.{h,cpp}, deploy/<name>.yaml: a pattern, not one file
                if PLACEHOLDER.search(path + after) or (root / path).exists():
                    continue
                problems.append(f"{where}: {path}: no such file or directory")
    problems = list(dict.fromkeys(problems))  # a name twice on a line (a link's text and target)
    for problem in problems:
        print(problem)
    checked = len(documents)
    print(f"readme_references: {checked} documents, {len(problems)} names that do not exist")
    return 1 if problems else 0


def is_code(line: str, target: str) -> bool:
    """Whether `make TARGET` stands in a code span or a code block line (a command)."""
    if line.startswith(("make ", "sudo make ")):
        return True
    return any(f"make {target}" in span for span in re.findall(r"`([^`]*)`", line))


if __name__ == "__main__":
    sys.exit(main())
