"""The HTML page of every golden trace, opened in a real headless browser (Debian's chromium,
driven by selenium through Debian's chromedriver): the test reads the page's DOM, not the file.
It checks the lanes and cells of the step shown, the strip with the step where an invariant
breaks, the slider and the buttons moving the state, and each step's marks and state diff."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_helpers import REJECTED
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from kreplica.conformance.cli.main import main
from kreplica.conformance.explain.timeline import Frame, Timeline, timeline
from kreplica.conformance.tla.itf import read_trace

GOLDEN = Path(__file__).resolve().parent.parent / "traces" / "golden"
TRACES = sorted(GOLDEN.glob("*.itf.json"))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",  # as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # the machine's network is closed
    "--disable-component-update",
    "--disable-sync",
)


def _browsers(profile: Path) -> list[int]:
    """The pids of processes started with this browser profile."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(profile).encode() in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """One headless chromium for the module; none of its processes is left behind."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(binary), f"{binary} is missing: `make unit` installs chromium"
    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        deadline = time.monotonic() + 10
        while _browsers(profile) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _browsers(profile)
        for pid in left:
            os.kill(pid, 9)
        assert not left, f"chromium processes left behind: {left}"


def _open(browser: WebDriver, trace: Path, tmp_path: Path) -> Timeline:
    page = tmp_path / "trace.html"
    result = CliRunner().invoke(main, ["explain", str(trace), "--quiet", "--html", str(page)])
    assert result.exit_code == 0, result.output
    browser.get(page.as_uri())
    return timeline(read_trace(trace), trace.name)


def _shown(browser: WebDriver) -> int:
    return int(browser.find_element(By.ID, "step").text.removeprefix("step "))


def _assert_shows(browser: WebDriver, frame: Frame) -> None:
    """The page shows `frame`: its words, one lane per replica with its cells, marks, diff."""
    assert _shown(browser) == frame.index
    assert browser.find_element(By.ID, "words").text == frame.words
    lanes = browser.find_elements(By.CSS_SELECTOR, "#lanes .lane")
    assert [int(lane.get_attribute("data-replica") or 0) for lane in lanes] == [
        lane.replica for lane in frame.lanes
    ]
    for element, lane in zip(lanes, frame.lanes, strict=True):
        cells = element.find_elements(By.CSS_SELECTOR, ".cell")
        live = [c for c in lane.cells if c.offset >= lane.log_start]
        shown = [c.text for c in cells if "deleted" not in (c.get_attribute("class") or "")]
        assert shown == [str(c.record) for c in live]
        assert f"HW {lane.hw}, LEO {lane.leo}" in element.text
    marks = browser.find_elements(By.CSS_SELECTOR, "#marks li")
    assert [m.text for m in marks] == [m.text for m in frame.marks]
    rows = browser.find_elements(By.CSS_SELECTOR, "#diff-body tr")
    assert [r.find_element(By.CSS_SELECTOR, "td").text for r in rows] == [
        name for name, _, _ in frame.changed
    ]


@pytest.mark.parametrize("trace", TRACES, ids=[p.name.split(".")[0] for p in TRACES])
def test_the_page_steps_through_the_run(browser: WebDriver, trace: Path, tmp_path: Path) -> None:
    """The page opens at the first broken invariant (its tick red and current), or at step 0;
    the slider, then next and previous, move the lanes, marks and diff to other steps."""
    line = _open(browser, trace, tmp_path)
    ticks = browser.find_elements(By.CSS_SELECTOR, "#strip .tick")
    assert len(ticks) == len(line.frames)
    broken = [i for i, t in enumerate(ticks) if "broken" in (t.get_attribute("class") or "")]
    expected = [f.index for f in line.frames if any(m.kind == "invariant" for m in f.marks)]
    assert broken == expected
    start = line.first_violation or 0
    assert "current" in (ticks[start].get_attribute("class") or "")
    _assert_shows(browser, line.frames[start])
    slider = browser.find_element(By.ID, "slider")
    browser.execute_script(
        "arguments[0].value = 0; arguments[0].dispatchEvent(new Event('input'))", slider
    )
    _assert_shows(browser, line.frames[0])
    browser.find_element(By.ID, "next").click()
    _assert_shows(browser, line.frames[1])
    browser.find_element(By.ID, "prev").click()
    browser.find_element(By.ID, "prev").click()  # stays at the first step
    _assert_shows(browser, line.frames[0])
    ticks[-1].click()
    _assert_shows(browser, line.frames[-1])


def test_a_marked_cell_is_outlined(browser: WebDriver, tmp_path: Path) -> None:
    """S3: at step 5 the logs diverge at offset 0, and both replicas' cells there are marked."""
    _open(browser, GOLDEN / "S3_Kip101FastFailover.itf.json", tmp_path)
    browser.find_elements(By.CSS_SELECTOR, "#strip .tick")[5].click()
    marked = browser.find_elements(By.CSS_SELECTOR, "#lanes .cell.marked")
    assert sorted((c.get_attribute("data-offset"), c.text) for c in marked) == [
        ("0", "1"),
        ("0", "2"),
    ]


def test_a_rejected_trace_says_where_and_why(
    browser: WebDriver, rejected_results: Path, tmp_path: Path
) -> None:
    """--results: the page opens at the step conform rejected (its tick red), the rejection
    block names the variables and the false conjunct, and its button goes back there."""
    page = tmp_path / "rejected.html"
    args = ["explain", str(REJECTED), "--quiet", "--results", str(rejected_results)]
    result = CliRunner().invoke(main, [*args, "--html", str(page)])
    assert result.exit_code == 0, result.output
    browser.get(page.as_uri())
    assert _shown(browser) == 7
    ticks = browser.find_elements(By.CSS_SELECTOR, "#strip .tick")
    assert "broken" in (ticks[7].get_attribute("class") or "")
    block = browser.find_element(By.ID, "rejection").text
    assert "conform rejected step 7" in block
    assert "hw: the trace logged [3,3,0]; the spec allows [3,2,0]" in block
    assert "why: KafkaReplication.tla:" in block and "Len(newLog) = 2" in block
    marks = [m.text for m in browser.find_elements(By.CSS_SELECTOR, "#marks li")]
    assert any(m.startswith("conform rejected step 7") for m in marks)
    ticks[0].click()
    assert _shown(browser) == 0
    browser.find_element(By.ID, "to-rejected").click()
    assert _shown(browser) == 7


REAL = Path(__file__).resolve().parent / "fixtures" / "explain" / "real-leader-crash.itf.json"
"""40 steps of a real run (tests/test_explain.py says which)."""


def _fields(browser: WebDriver) -> dict[str, tuple[str, bool]]:
    """The controller lane's fields: text, and whether the step changed it."""
    return {
        f.get_attribute("data-field") or "": (f.text, "changed" in (f.get_attribute("class") or ""))
        for f in browser.find_elements(By.CSS_SELECTOR, "#controller .field")
    }


def test_the_controller_lane_shows_what_the_step_changed(
    browser: WebDriver, tmp_path: Path
) -> None:
    """S3's step 2 (the controller elects 2 in epoch 1) changes only the controller's lane."""
    _open(browser, GOLDEN / "S3_Kip101FastFailover.itf.json", tmp_path)
    browser.find_elements(By.CSS_SELECTOR, "#strip .tick")[2].click()
    assert _fields(browser) == {
        "leader": ("leader 2", True),
        "epoch": ("epoch 1", True),
        "isr": ("ISR {1,2}", False),
        "live": ("live {1,2}", False),
    }
    assert not browser.find_elements(By.CSS_SELECTOR, "#lanes .changed")


def test_a_real_trace_shows_gaps_folds_and_unknown_values(
    browser: WebDriver, tmp_path: Path
) -> None:
    """The real trace's page: the idle fetches folded into one step whose 4 s gap stands out
    (tick and time), the controller's new epoch at the step its failure detection, where each
    step was seen, and `HW ?` where no hook saw the HW."""
    page = tmp_path / "real.html"
    result = CliRunner().invoke(main, ["explain", str(REAL), "--quiet", "--html", str(page)])
    assert result.exit_code == 0, result.output
    browser.get(page.as_uri())
    assert (
        "real Kafka 2.6.3, kreplica agent: it does not observe"
        in browser.find_element(By.CSS_SELECTOR, ".note").text
    )
    ticks = browser.find_elements(By.CSS_SELECTOR, "#strip .tick")
    assert len(ticks) == 17  # 40 steps, 26 of them in 3 folded rows
    classes = ticks[1].get_attribute("class") or ""
    assert "long" in classes and "folded" in classes
    ticks[1].click()
    assert browser.find_element(By.ID, "step").text == "steps 1 to 21"
    time = browser.find_element(By.ID, "time")
    assert time.text == "+4.028 s, t 4.028 s" and "long" in (time.get_attribute("class") or "")
    ticks[3].click()
    assert _shown(browser) == 23 and browser.find_element(By.ID, "time").text == "+0, t 4.348 s"
    assert _fields(browser) == {
        "leader": ("leader 2", True),
        "epoch": ("epoch 1", True),
        "isr": ("ISR {2,3}", True),
        "live": ("live {2,3}", True),
    }
    assert "broker-2/events.jsonl:150" in browser.find_element(By.ID, "source").text
    ticks[2].click()  # the crash, the step before: epoch 0, nothing changed at the controller
    assert _fields(browser)["epoch"] == ("epoch 0", False)
    ticks[-1].click()
    assert _shown(browser) == 39
    assert "not observed at this step: hw" in browser.find_element(By.ID, "source").text
    lanes = browser.find_elements(By.CSS_SELECTOR, "#lanes .lane")
    assert all("HW ?, LEO 5" in lane.text for lane in lanes)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#lanes .hw.unknown")) == 3
