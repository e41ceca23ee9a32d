"""What prove runs and how its inputs are read: steps as expressions of the threshold, ages,
loopback-only URLs, the threshold from a server command line."""
import pytest

from dynspec_cli.prove.plan import (PlanError, format_age, loopback_base, parse_age, parse_steps,
                                    threshold_from_argv)
from dynspec_cli.prove.session import make_plan


def test_steps_are_expressions_of_the_threshold():
    assert parse_steps("1,N,N+1,2N", 5) == (1, 5, 6, 10)
    assert parse_steps(" 2 , 3n , N-1, 4*N, N ", 4) == (2, 12, 3, 16, 4)
    assert parse_steps("1,1,N", 1) == (1,)  # duplicates dropped, order kept


@pytest.mark.parametrize("bad", ["", "x", "N*N", "N-5", "0", "1,,-2"])
def test_bad_steps_are_refused(bad):
    with pytest.raises(PlanError):
        parse_steps(bad, 4)


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("1h", 3600), ("2d", 172800), ("45", 45),
                                          ("1.5h", 5400), (" 10 min ", 600)])
def test_ages(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("bad", ["", "h", "1x", "-1h", "1 hour"])
def test_bad_ages(bad):
    with pytest.raises(PlanError):
        parse_age(bad)


def test_format_age():
    assert format_age(5) == "5s" and format_age(600) == "10m 0s" and format_age(7322) == "2h 2m"


@pytest.mark.parametrize("url,base", [("http://127.0.0.1:30000", "http://127.0.0.1:30000"),
                                      ("127.0.0.2:8000/generate", "http://127.0.0.2:8000"),
                                      ("http://localhost:1", "http://localhost:1"),
                                      ("http://[::1]:30000/", "http://[::1]:30000")])
def test_loopback_urls_are_accepted(url, base):
    assert loopback_base(url) == base


@pytest.mark.parametrize("url", ["http://10.0.0.5:30000", "http://gpu-box:30000", "http://0.0.0.0:30000",
                                 "ftp://127.0.0.1/", "http://127.0.0.1.evil.com:1"])
def test_other_urls_are_refused(url):
    with pytest.raises(PlanError):
        loopback_base(url)


def test_threshold_from_argv_last_wins_and_both_forms():
    flag = "--speculative-disable-batch-threshold"
    assert threshold_from_argv(["python3", "-m", "sglang.launch_server", flag, "8"], flag) == 8
    assert threshold_from_argv([f"{flag}=3", flag, "7"], flag) == 7
    assert threshold_from_argv(["--port", "1"], flag) is None
    with pytest.raises(PlanError):
        threshold_from_argv([flag, "***"], flag)


def test_make_plan_bounds():
    p = make_plan(4, "--threshold", None, 2.5, 10, 64)
    assert p.steps == (1, 4, 5, 8) and p.duration == 2.5 and p.max_requests == 10
    for bad in [dict(duration=0), dict(max_requests=-1), dict(max_new_tokens=1)]:
        kw = {"duration": 1.0, "max_requests": 0, "max_new_tokens": 8, **bad}
        with pytest.raises(PlanError):
            make_plan(4, "", "1", kw["duration"], kw["max_requests"], kw["max_new_tokens"])
