"""The door's parts on their own: refusal counting, lanes, connection eviction."""

from __future__ import annotations

from tools.agent.door import Conn, Door, DoorLimits, RefusalLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refusals_are_written_in_full_then_summarised_per_key_and_period() -> None:
    clock, lines = Clock(), []
    log = RefusalLog(lambda **f: lines.append(f), period_s=10, detail_lines=3, max_keys=2,
                     clock=clock)
    for i in range(1000):
        log.record("10.0.0.1", "408" if i % 2 else "401", f"reason {i % 20}",
                   detail={"n": i}, user=f"claimed:{i % 7}")
    log.record("10.0.0.2", "429", "busy", detail={"n": "b"})
    log.record("10.0.0.3", "429", "busy", detail={"n": "c"})  # over max_keys: aggregated
    assert [x["n"] for x in lines] == [0, 1, 2, "b", "c"]
    log.flush()
    assert len(lines) == 5  # the period is not over
    clock.now += 10
    log.flush()
    summary = [x for x in lines if x.get("event") == "refusal_summary"]
    assert len(summary) == 1  # 10.0.0.2 and the aggregate wrote everything in full
    s = summary[0]
    assert s["remote"] == "10.0.0.1" and s["refused"] == 1000 and s["written_in_full"] == 3
    assert s["counts"] == {"401": 500, "408": 500}
    assert len(s["reasons"]) == RefusalLog.MAX_REASONS and len(s["claimed_users"]) == 5
    assert s["message"].startswith("refused 1,000 requests or connections from 10.0.0.1 "
                                   "in the last 10 s: ")
    # a new period starts afresh for the key
    log.record("10.0.0.1", "408", "again", detail={"n": "again"})
    assert lines[-1] == {"n": "again"}
    # at most (detail_lines + 1) lines per key and period, whatever the rate
    for _ in range(5):
        for _ in range(10_000):
            log.record("10.0.0.9", "408", "slow", detail={"n": 9})
        clock.now += 10
    log.flush(force=True)
    nine = [x for x in lines if x.get("remote") == "10.0.0.9" or x == {"n": 9}]
    assert len(nine) <= 5 * 4


def test_lanes_keep_room_for_small_bodies_sent_at_once() -> None:
    door = Door(DoorLimits(unverified_per_source=2, max_unverified=3, fast_max_body=100))
    assert [door.admit("a", 10) for _ in range(2)] == ["normal", "normal"]
    assert door.admit("a", 10) == "fast"          # the source's normal lane is full
    assert door.admit("a", 101) is None           # too big for the fast lane
    assert door.admit("a", None) is None          # chunked: no fast lane
    assert door.admit("b", 500) == "normal"       # another source has its own
    assert door.admit("c", 500) is None           # ... until the global cap
    assert door.timeout("fast") < door.timeout("normal")
    door.release("a", "normal")
    door.release("a", "fast")
    assert door.admit("c", 500) == "normal"
    assert door.unverified == {"a": 1, "b": 1, "c": 1}


def _conn(door: Door, source: str, port: int, closed: list[int], at: float) -> Conn:
    return Conn(source=source, port=port, opened=at, close=lambda: closed.append(port))


def test_connections_over_the_cap_evict_idle_then_unverified_never_verified() -> None:
    clock, closed = Clock(), []
    door = Door(DoorLimits(conns_per_source=2, max_conns=6), clock=clock)

    def opened(port: int, source: str = "a") -> Conn:
        clock.now += 1
        c = _conn(door, source, port, closed, clock.now)
        assert door.open(c)
        return c

    c0, c1 = opened(0), opened(1)
    c0.busy = True                          # a request is being read on 0
    c1.busy = c1.verified = True            # 1 serves a signed request: not counted
    c2 = opened(2)
    assert closed == []
    opened(3)                               # 0 and 2 unverified: the idle one goes
    assert closed == [2]
    c4 = opened(4)
    assert closed == [2, 3]                 # the oldest idle again
    c4.busy = True
    opened(5)                               # no idle one: the oldest unverified request
    assert closed == [2, 3, 0] and door.lookup(("a", 0)) is None
    assert door.lookup(("a", 1)) is c1 and c2 is not None
    # the global cap (6) takes from the heaviest source, not from a quiet one
    b1 = opened(1, "b")
    b1.busy = b1.verified = True
    opened(2, "b")
    opened(3, "c")
    assert door.count == 6 and closed == [2, 3, 0]
    opened(4, "c")                          # a has 3 connections: its oldest idle goes
    assert closed == [2, 3, 0, 5] and door.count == 6
    for c in list(door.by_peer.values()):
        c.busy = c.verified = True
    refused = Conn(source="d", port=1, opened=clock.now, close=lambda: closed.append(-1))
    assert not door.open(refused)           # every slot serves a signed request
    assert "d" not in door.by_source
    door.closed(c1)
    door.closed(c1)  # twice is harmless
    assert door.count == 5 and door.lookup(("a", 1)) is None


def test_a_source_whose_last_connection_is_evicted_is_still_tracked() -> None:
    closed: list[int] = []
    door = Door(DoorLimits(conns_per_source=4, max_conns=1))
    first = Conn(source="a", port=1, opened=0.0, close=lambda: closed.append(1))
    assert door.open(first)
    second = Conn(source="a", port=2, opened=1.0, close=lambda: closed.append(2))
    assert door.open(second) and closed == [1]  # the global cap took a's only one
    assert door.lookup(("a", 2)) is second and door.by_source["a"] == {id(second): second}
    assert door.count == 1
