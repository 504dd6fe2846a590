"""The manual stays usable: README.md and docs/*.md are checked on every build.

DocsLinks (CTest docs_links): every relative link and image in README.md and
docs/*.md resolves to a file, and a #fragment to a heading of that page; the
README stays an entrance (at most 300 lines) and each docs page at most 400
lines; no page tells session history ("session 6").

DocsCommands (CTest docs_commands): every `kvscope-cli SUBCOMMAND --flag ...`
quoted in code in those pages names a subcommand and flags that
`kvscope-cli --help` lists (diff and audit also take run's options), and every
`kvscope --flag` one the GUI's --help lists. The binaries come from
$KVSCOPE_CLI and $KVSCOPE_GUI; a missing $KVSCOPE_GUI skips the GUI half.

Run by hand from the source tree:
  KVSCOPE_CLI=build/app/kvscope-cli /usr/bin/python3 -m unittest -v check_docs
(with tests/python as the working directory or on PYTHONPATH).
"""
import os
import re
import subprocess
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KVSCOPE_SOURCE_DIR", Path(__file__).resolve().parents[2])).resolve()
README_MAX_LINES = 300
DOCS_PAGE_MAX_LINES = 400

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HISTORY = re.compile(r"\bsession\s+\d+\b|\bsessions\s+\d+\s*-\s*\d+\b", re.IGNORECASE)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def pages():
    """README.md and every docs/*.md, sorted."""
    return [SOURCE_DIR / "README.md"] + sorted((SOURCE_DIR / "docs").glob("*.md"))


def split_code(text):
    """(prose lines, code lines) of a markdown page: fenced blocks and 4-space
    indented blocks are code; inline code spans stay in the prose line."""
    prose, code = [], []
    in_fence = False
    previous_blank = True
    for number, line in enumerate(text.split("\n"), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            previous_blank = False
            continue
        indented = line.startswith("    ") and previous_blank_or_code(code, number, previous_blank)
        if in_fence or (indented and not line.lstrip().startswith(("-", "*", "|"))):
            code.append((number, line))
        else:
            prose.append((number, line))
        previous_blank = not line.strip()
    return prose, code


def previous_blank_or_code(code, number, previous_blank):
    # An indented line is code when it follows a blank line or another code line.
    return previous_blank or (code and code[-1][0] == number - 1)


def github_slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """Every heading anchor of a markdown file (duplicates numbered as GitHub does)."""
    if path not in cache:
        prose, _ = split_code(path.read_text(encoding="utf-8"))
        seen, result = {}, set()
        for _, line in prose:
            match = HEADING.match(line)
            if not match:
                continue
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            result.add(slug if count == 0 else f"{slug}-{count}")
        cache[path] = result
    return cache[path]


def link_problems(page, text=None):
    """Broken relative links and images of one page (its text read from the
    file unless given), as readable strings."""
    problems = []
    prose, _ = split_code(page.read_text(encoding="utf-8") if text is None else text)
    for number, line in prose:
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # http:, https:, mailto:
            path_part, _, fragment = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(SOURCE_DIR)}:{number}: link '{target}'"
            if not resolved.exists():
                problems.append(f"{where}: {path_part} does not exist")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                problems.append(f"{where}: no heading with anchor #{fragment} in {resolved.name}")
    return problems


class DocsLinks(unittest.TestCase):
    def test_every_relative_link_and_image_resolves(self):
        problems = [p for page in pages() for p in link_problems(page)]
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_readme_is_an_entrance_and_pages_stay_short(self):
        problems = []
        for page in pages():
            lines = page.read_text(encoding="utf-8").count("\n")
            limit = README_MAX_LINES if page.name == "README.md" and page.parent == SOURCE_DIR else DOCS_PAGE_MAX_LINES
            if lines > limit:
                problems.append(f"{page.relative_to(SOURCE_DIR)}: {lines} lines, more than {limit}")
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_no_session_history(self):
        problems = []
        for page in pages():
            for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), start=1):
                if HISTORY.search(line):
                    problems.append(f"{page.relative_to(SOURCE_DIR)}:{number}: {line.strip()}")
        self.assertEqual(problems, [], "\nstate the current figure with its date and command instead:\n"
                         + "\n".join(problems))

    def test_the_checker_catches_what_it_should(self):
        # The checks above must be able to fail: a broken link, a missing
        # anchor and a missing image of a page placed in docs/ are reported,
        # a link inside a code block is not read.
        scratch = "[ok](architecture.md#layers) [gone](no-such-file.md) [bad](architecture.md#no-such-heading)\n" \
                  "![img](no-such.png) [up](../README.md)\n\n```\n[in code](ignored.md)\n```\n"
        problems = link_problems(SOURCE_DIR / "docs" / "scratch.md", scratch)
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(HISTORY.search("measured in session 6"))
        self.assertEqual(github_slug("6. Measured"), "6-measured")
        self.assertEqual(github_slug("The window (`kvscope`)"), "the-window-kvscope")


def code_spans(page):
    """Every command-like span of a page: inline code in prose, and code-block
    lines (a line ending in a backslash continues on the next)."""
    prose, code = split_code(page.read_text(encoding="utf-8"))
    spans = []
    for number, line in prose:
        spans += [(number, m.group(2)) for m in INLINE_CODE.finditer(line)]
    pending, start = "", None
    for number, line in code:
        text = line.split(" # ")[0] if not line.lstrip().startswith("#") else ""
        if pending:
            text = pending + " " + text.strip()
        else:
            start = number
        if text.rstrip().endswith("\\"):
            pending = text.rstrip()[:-1]
            continue
        pending = ""
        spans.append((start, text))
    return spans


def usage_by_command(help_text):
    """kvscope-cli --help's usage text per subcommand."""
    usage, current = {}, None
    for line in help_text.split("\n"):
        match = re.match(r"^  ([a-z][a-z-]*)(\s|$)", line)
        if match:
            current = match.group(1)
            usage[current] = usage.get(current, "") + line + "\n"
        elif current and line.startswith("   "):
            usage[current] += line + "\n"
        elif not line.strip():
            current = None
    return usage


def run_help(binary, env=None):
    result = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, env=env)
    return result.stdout + result.stderr


class DocsCommands(unittest.TestCase):
    def test_cli_commands_and_flags_in_the_docs_exist(self):
        cli = os.environ.get("KVSCOPE_CLI")
        if not cli:
            self.skipTest("KVSCOPE_CLI is not set")
        usage = usage_by_command(run_help(cli))
        self.assertIn("run", usage, "kvscope-cli --help lists no 'run'")
        always = {"--json", "--help"}
        problems, checked = [], 0
        for page in pages():
            for number, span in code_spans(page):
                for match in re.finditer(r"(?<![\w/-])(?:[\w./-]*/)?kvscope-cli\s+([a-z][a-z-]*)(?=\s|$)([^`]*)", span):
                    command, rest = match.group(1), match.group(2)
                    rest = re.split(r"\bkvscope-cli\b|[;|&]", rest)[0]
                    where = f"{page.relative_to(SOURCE_DIR)}:{number}: kvscope-cli {command}"
                    if command not in usage:
                        problems.append(f"{where}: no such subcommand in kvscope-cli --help")
                        continue
                    allowed = usage[command] + (usage["run"] if command in ("diff", "audit") else "")
                    for flag in FLAG.findall(rest):
                        checked += 1
                        if flag not in always and not re.search(re.escape(flag) + r"(?![\w-])", allowed):
                            problems.append(f"{where}: {flag} is not in its usage")
        self.assertGreater(checked, 50, "the docs quote fewer CLI flags than expected: is the parser broken?")
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_gui_flags_in_the_docs_exist(self):
        gui = os.environ.get("KVSCOPE_GUI")
        if not gui or not os.path.exists(gui):
            self.skipTest("KVSCOPE_GUI is not set or not built (a build without the GUI)")
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
        help_text = run_help(gui, env)
        self.assertIn("--lesson", help_text)
        problems = []
        for page in pages():
            for number, span in code_spans(page):
                for match in re.finditer(r"(?<![\w-])(?:[\w./-]*/)?kvscope(?![\w-])((?:\s+[^`]*)?)", span):
                    rest = re.split(r"\bkvscope-cli\b|[;|&]", match.group(1))[0]
                    for flag in FLAG.findall(rest):
                        if not re.search(re.escape(flag) + r"(?![\w-])", help_text):
                            problems.append(f"{page.relative_to(SOURCE_DIR)}:{number}: kvscope {flag} is not in kvscope --help")
        self.assertEqual(problems, [], "\n" + "\n".join(problems))


if __name__ == "__main__":
    unittest.main()
