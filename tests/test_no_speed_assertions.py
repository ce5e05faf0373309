"""House rule: tests assert correctness and behaviour, never speed. A wall-clock bound
(`assert time.perf_counter() - t0 < 0.05`, `assert elapsed < 6.0`) fails on a loaded
machine and passes on a rerun; speed belongs in bench/. This scan finds such asserts in
tests/ (a duration bounded on a separate line, `elapsed = time.perf_counter() - t0` then
`assert elapsed < x`, too); a deadline that only guards against a hang (`while
time.monotonic() < end`) is not a duration. Comparisons of two measured timings were
removed by hand (issue 14)."""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCK = re.compile(r"(perf_counter|monotonic|time\.time)\(\)\s*-")   # a duration
BOUND = re.compile(r"assert\b.*(<|>)")


def _wall_clock_asserts(source: str) -> list[str]:
    clocked: set[str] = set()
    found = []
    for line in source.splitlines():
        code = line.split("#", 1)[0]
        m = re.match(r"\s*(\w+)\s*=\s*.*", code)
        if m and CLOCK.search(code):
            clocked.add(m.group(1))
        if BOUND.search(code) and (CLOCK.search(code)
                                   or any(re.search(rf"\b{v}\b", code) for v in clocked)):
            found.append(line.strip())
    return found


def test_no_test_asserts_a_wall_clock_bound():
    offenders = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        hits = _wall_clock_asserts(path.read_text())
        if hits:
            offenders[str(path.relative_to(TESTS))] = hits
    assert not offenders, offenders


def test_the_scan_finds_the_usual_forms():
    assert _wall_clock_asserts("t0 = time.perf_counter()\nf()\n"
                               "assert time.perf_counter() - t0 < 0.05\n")
    assert _wall_clock_asserts("start = time.monotonic()\nf()\n"
                               "elapsed = time.monotonic() - start\nassert elapsed < 6.0\n")
    assert not _wall_clock_asserts("deadline = time.time() + 60\nwhile time.time() < deadline:"
                                   "\n    pass\nassert len(x) == 3\n")
