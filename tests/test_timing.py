"""hf_attn.timing: the one clock, interleaved repeats and their summary, threads and the machine's description."""

from __future__ import annotations

import statistics
import time

import pytest
import torch

from hf_attn import timing


def test_each_repeat_calls_every_step_once_in_an_order_rotated_from_the_last() -> None:
    calls: list[str] = []
    steps = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    prepared: list[str] = []
    times = timing.interleaved_times(steps, {"b": lambda: prepared.append("b")}, warmup=1, repeats=3)
    assert calls == list("abc" + "abc" + "bca" + "cab")
    assert prepared == ["b"] * 4  # before each call of its step, warm-up included
    assert {name: len(seconds) for name, seconds in times.items()} == {"a": 3, "b": 3, "c": 3}


@pytest.mark.parametrize("clock", sorted(timing.CLOCKS))
def test_a_step_is_timed_on_the_clock_asked_for(clock: str) -> None:
    """Sleeping takes wall-clock time and next to no CPU time; spinning for 50 ms of the thread's CPU time takes
    at least that much of every clock."""

    def spin() -> None:
        until = time.thread_time() + 0.05
        while time.thread_time() < until:
            pass

    asleep = timing.timed(lambda: time.sleep(0.05), clock=clock)
    with pytest.raises(ValueError, match="unknown clock 'cpu'; the clocks are wall, thread, process"):
        timing.timed(spin, clock="cpu")
    assert timing.timed(spin, clock=clock) >= 0.05
    assert (asleep >= 0.05) if clock == "wall" else (asleep < 0.02)


def test_the_summary_is_in_milliseconds_and_keeps_every_repeat_in_order() -> None:
    seconds = [0.003, 0.001, 0.004, 0.002]
    summary = timing.summarize(seconds)
    assert summary["median_ms"] == pytest.approx(1e3 * statistics.median(seconds))
    assert (summary["min_ms"], summary["max_ms"]) == pytest.approx((1.0, 4.0))
    assert summary["times_ms"] == pytest.approx([3.0, 1.0, 4.0, 2.0])
    medians = timing.median_seconds({"sleep": lambda: time.sleep(0.01)}, warmup=0, repeats=3)
    assert medians["sleep"] >= 0.01


def test_threads_are_set_only_when_asked_and_the_machine_is_described() -> None:
    before = torch.get_num_threads()
    try:
        assert timing.use_threads(None) == before
        assert timing.use_threads(1) == torch.get_num_threads() == 1
        record = timing.machine()
        assert record["threads"] == 1 and record["device"] == "cpu" and record["cpu"] == timing.this_cpu()
        assert record["torch"] == torch.__version__ and "gpu" not in record
    finally:
        torch.set_num_threads(before)
