"""P9 (bench/rival.py): the CPU-per-call arithmetic from /proc samples, the ratio and whether it
holds, and what the figures say when a server was not measured. No server is started here."""

import time
from pathlib import Path

import pytest

from bench import rival
from bench.rival import CpuSample, Measured

# A /proc/<pid>/stat line whose command holds spaces and a ')': utime 250, stime 50 ticks.
STAT = (
    "4242 (python (up) x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 250 50 0 0 20 0 9 0 "
    "123456 1900000000 95000 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 1 0 0"
)


def test_cpu_seconds_are_utime_plus_stime_counted_after_the_commands_last_parenthesis():
    assert rival.cpu_seconds(STAT, ticks_per_second=100) == 3.0


def test_cpu_seconds_of_this_process_grow_by_the_cpu_it_spends():
    stat = Path("/proc/self/stat")
    before_proc, before_clock = rival.cpu_seconds(stat.read_text()), time.process_time()
    while time.process_time() - before_clock < 0.3:
        pass

    grown = rival.cpu_seconds(stat.read_text()) - before_proc

    assert 0.2 <= grown <= time.process_time() - before_clock + 0.05


def test_rss_is_read_from_vmrss_in_mib_and_a_status_without_it_is_an_error():
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmRSS:\t  104448 kB\nThreads:\t9\n"

    assert rival.rss_mib(status) == 102.0
    with pytest.raises(ValueError, match="VmRSS"):
        rival.rss_mib("Name:\tzombie\nState:\tZ (zombie)\n")


def test_cpu_per_call_takes_the_idle_cpu_of_the_same_wall_time_off():
    before, after = CpuSample(10.0, at=100.0), CpuSample(11.5, at=110.0)

    # 1.5 s of CPU over 10 s, 0.05 s/s of it idle: 1.0 s for 300 calls
    assert rival.cpu_per_call_ms(before, after, 300, idle=0.05) == pytest.approx(3.333, abs=1e-3)
    assert rival.cpu_per_call_ms(before, after, 300, idle=0.0) == pytest.approx(5.0)


def test_cpu_per_call_is_never_negative_when_the_idle_estimate_exceeds_the_ticks_seen():
    assert rival.cpu_per_call_ms(CpuSample(1.0, 0.0), CpuSample(1.01, 1.0), 10, idle=0.5) == 0.0


def test_idle_rate_is_cpu_seconds_per_wall_second():
    assert rival.idle_rate(CpuSample(2.0, at=50.0), CpuSample(2.25, at=55.0)) == 0.05


def measured(cpu_ms: float, latencies: tuple[float, ...] = (1.0, 2.0, 3.0)) -> Measured:
    return Measured(cpu_ms, latencies)


def test_the_figure_is_our_cpu_per_call_over_the_rivals_and_misses_above_one():
    figure = rival.call_figure("PutItem (conditional)", measured(2.6), measured(2.0))

    assert (figure.id, figure.value, figure.holds) == ("P9", 1.3, False)
    assert figure.budget == "<= 1.0, CPU and p50 latency"
    assert figure.name == "per call vs ministack: PutItem (conditional)"
    assert "ours: 2.60 ms CPU/call" in figure.detail
    assert "ministack: 2.00 ms CPU/call" in figure.detail


@pytest.mark.parametrize(("ours", "holds"), [(0.9, True), (1.0, True), (1.01, False)])
def test_the_figure_holds_at_or_below_the_rivals_cpu(ours, holds):
    assert rival.call_figure("Query", measured(ours), measured(1.0)).holds is holds


def test_the_figure_misses_when_our_median_latency_is_above_the_rivals_even_at_less_cpu():
    figure = rival.call_figure("PublishBatch", measured(0.9, (2.1,)), measured(1.0, (2.0,)))

    assert (figure.value, figure.holds) == (0.9, False)
    assert "latency p50 1.05x (MISSES" in figure.detail


def test_the_detail_gives_both_latencies_p50_and_p95_and_their_ratio():
    ours = measured(1.0, tuple(float(n) for n in range(1, 101)))  # p50 50.5, p95 95
    theirs = measured(1.0, tuple(float(n) / 2 for n in range(1, 101)))

    detail = rival.call_figure("SendMessage", ours, theirs).detail

    assert "latency p50 50.50 / p95 95.00 ms" in detail
    assert "latency p50 25.25 / p95 47.50 ms" in detail
    assert "latency p50 2.00x" in detail


def test_an_unavailable_rival_gives_no_ratio_but_says_why_and_keeps_our_numbers():
    why = "ministack 1.5.33 unavailable: `uv pip install` failed: no network"

    figure = rival.call_figure("Publish", measured(1.7), why)

    assert (figure.value, figure.holds) == (0, None)
    assert f"NOT MEASURED: {why}" in figure.detail
    assert "ours: 1.70 ms CPU/call" in figure.detail


def test_a_rival_cpu_below_the_clocks_resolution_gives_no_ratio():
    figure = rival.call_figure("Query", measured(1.0), measured(0.0))

    assert (figure.value, figure.holds) == (0, None)
    assert figure.detail.startswith("NO RATIO")


def test_the_memory_figure_is_the_rss_ratio_without_a_budget():
    figure = rival.memory_figure((292.0, 0.004), (104.0, 0.0))

    assert (figure.value, figure.holds, figure.budget) == (2.81, None, "-")
    assert "ours 292 MiB (idle CPU before the workload 0.4% of a core)" in figure.detail
    assert "ministack 104 MiB" in figure.detail


def test_the_memory_figure_of_an_unavailable_server_says_so():
    figure = rival.memory_figure((292.0, 0.0), "ministack 1.5.33 unavailable: crashed")

    assert (figure.value, figure.holds) == (0, None)
    assert "NOT MEASURED: ministack 1.5.33 unavailable: crashed" in figure.detail


def test_with_no_server_up_every_figure_reports_why_and_none_holds_or_misses():
    why = {"ours": "the local stack exited with 1 before `ready`", "ministack": "no network"}

    figures = rival._measure([], why)

    assert len(figures) == len(rival.OPERATIONS) + 1
    assert all(f.holds is None and f.value == 0 and "NOT MEASURED" in f.detail for f in figures)
    assert all("before `ready`" in f.detail and "no network" in f.detail for f in figures)


def environment_with(path: Path, *dist_infos: str) -> Path:
    """A fake environment at ``path``: its python and the given packages' dist-info dirs."""
    (path / "bin").mkdir(exist_ok=True)
    (path / "bin" / "python").touch()
    site = path / "lib" / "python3.13" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for dist_info in dist_infos:
        (site / dist_info).mkdir()
    return path


def test_the_rivals_environment_counts_as_installed_only_with_its_version(tmp_path):
    assert not rival.rival_installed(environment_with(tmp_path, "ministack-1.5.32.dist-info"))
    assert rival.rival_installed(environment_with(tmp_path, "ministack-1.5.33.dist-info"))


def test_the_rivals_environment_counts_as_installed_only_with_every_requirement(tmp_path):
    requirements = ("ministack==1.5.33", "aws-sam-translator==1.115.0")
    env = environment_with(tmp_path, "ministack-1.5.33.dist-info")

    assert not rival.rival_installed(env, requirements)
    environment_with(tmp_path, "aws_sam_translator-1.115.0.dist-info")
    assert rival.rival_installed(env, requirements)


def test_an_environment_that_cannot_be_created_is_an_error_naming_the_failed_step(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(rival.shutil, "which", lambda _: "/bin/false")

    with pytest.raises(RuntimeError, match=r"`/bin/false venv --python \.\.\.` failed"):
        rival.rival_python(tmp_path / "ministack")


def test_a_number_of_calls_below_one_is_refused_before_any_server_starts(monkeypatch):
    monkeypatch.setattr(rival, "CALLS", 0)

    with pytest.raises(ValueError, match="BENCH_P9_CALLS must be at least 1, not 0"):
        rival.run()
