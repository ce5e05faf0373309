"""Feeder: pulls only as many candidates as were asked for, posts them in order, then
the end; an error while pulling reaches the consumer; stop ends the pulling."""
import queue

from tvmlite.search.measure.feeder import Feeder


def _jobs(n, pulled, fail_at=None):
    for i in range(n):
        if i == fail_at:
            raise RuntimeError("the compiler went away")
        pulled.append(i)
        yield f"in{i}", f"build{i}"


def test_pulls_only_what_is_wanted_then_posts_the_end():
    inbox, pulled = queue.Queue(), []
    feeder = Feeder(_jobs(5, pulled), inbox, lambda inp, b: (inp, b))
    feeder.want(2)
    got = [inbox.get(timeout=10), inbox.get(timeout=10)]
    assert got == [("job", (0, ("in0", "build0"), "build0")),
                   ("job", (1, ("in1", "build1"), "build1"))]
    assert inbox.empty() and pulled == [0, 1]     # no credit, no third pull
    feeder.want(10)
    rest = [inbox.get(timeout=10) for _ in range(4)]
    assert [m[1][0] for m in rest[:3]] == [2, 3, 4] and rest[3] == ("end", None)


def test_an_error_while_pulling_is_posted_and_stop_ends_the_pulls():
    inbox = queue.Queue()
    feeder = Feeder(_jobs(3, [], fail_at=1), inbox, lambda inp, b: None)
    feeder.want(5)
    assert inbox.get(timeout=10)[0] == "job"
    kind, exc = inbox.get(timeout=10)
    assert kind == "failed" and "went away" in str(exc)
    pulled = []
    stopped = Feeder(_jobs(3, pulled), queue.Queue(), lambda inp, b: None)
    stopped.stop()
    stopped.want(3)
    stopped._thread.join(timeout=10)
    assert pulled == []
