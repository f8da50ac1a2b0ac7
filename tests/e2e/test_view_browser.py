"""`ajet view`'s page in a real headless Chromium (Playwright driving the system's Chromium): the
curves draw, the episode table opens an episode, hovering a token shows the id, logprob and
advantage recorded in samples.jsonl, the special-token toggle hides them, a corrupt line shows its
text, two episodes of a group compare. Screenshots go to $AJET_TEST_ARTIFACTS/view (default:
tests/artifacts/view, git-ignored)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.unit.view_run import ajet_view, build_view_run, copy_run

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("AJET_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts") / "view"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _chromium() -> str | None:
    for name in (os.environ.get("AJET_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        found = name and (shutil.which(name) or (Path(name).is_file() and name))
        if found:
            return str(found)
    return None


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set AJET_CHROMIUM to its path)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("view-browser")
    run = build_view_run(base / "made")
    damaged = copy_run(run, base / "damaged")
    with (damaged / "episodes.jsonl").open("a") as f:
        f.write('{"episode_id": "cut", "rew')  # a line a killed writer left half-written
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with ajet_view([run, damaged], base / "view.log") as url:
        yield url, run


@pytest.fixture
def page(browser, site):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    page.close()
    assert errors == []  # no script error on any page


def _samples(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def test_runs_page_draws_the_curves(page, site):
    url, _ = site
    page.goto(url)
    page.wait_for_selector('.chart[data-metric="reward_mean"] canvas')
    assert page.locator("#runs-table tr[data-run]").count() == 2
    assert page.locator(".chart canvas").count() >= 4  # reward, success, loss, grad norm, ...
    page.screenshot(path=str(ARTIFACTS / "runs.png"))


def test_hovering_a_token_shows_its_recorded_id_logprob_and_advantage(page, site):
    url, run = site
    page.goto(url + "#/episodes?run=0")
    page.locator("#episodes-table tr[data-line]").first.click()
    page.wait_for_selector("#tokens-0 .tok")
    episode_id = page.locator(".summary dd").first.inner_text()
    recorded = [s for s in _samples(run) if s["episode_id"] == episode_id][0]
    trained = [i for i, m in enumerate(recorded["loss_mask"]) if m]
    for i in (trained[0], trained[-1]):
        page.hover(f"#tok-0-{i}")
        assert page.locator("#tok-info").is_visible()
        assert page.inner_text("#tok-info-id") == str(recorded["input_ids"][i])
        assert float(page.inner_text("#tok-info-logprob")) == pytest.approx(recorded["old_logprobs"][i], abs=5e-5)
        assert float(page.inner_text("#tok-info-adv")) == pytest.approx(recorded["advantage"], abs=5e-5)
        assert page.get_attribute(f"#tok-0-{i}", "data-mask") == "1"
    context = recorded["loss_mask"].index(0)
    page.hover(f"#tok-0-{context}")
    assert page.inner_text("#tok-info-id") == str(recorded["input_ids"][context])
    assert page.inner_text("#tok-info-logprob") == "–" and page.inner_text("#tok-info-mask").startswith("0")
    page.screenshot(path=str(ARTIFACTS / "episode-token.png"), full_page=True)

    special = page.locator("#tokens-0 .tok.special")
    assert special.count() > 0 and special.first.is_visible()
    page.uncheck("#toggle-special")
    assert not special.first.is_visible()
    assert page.locator("#judge").inner_text().count("penalty") >= 1
    assert page.locator("#timeline tr[data-call]").count() == 3


def test_a_corrupt_line_is_shown_not_a_blank_page(page, site):
    url, _ = site
    page.goto(url + "#/episodes?run=1")
    row = page.locator("#episodes-table tr.corrupt")
    row.wait_for()
    assert "half-written" in row.inner_text() and '{"episode_id": "cut", "rew' in row.inner_text()
    row.click()
    page.wait_for_selector("#corrupt")
    assert '{"episode_id": "cut", "rew' in page.inner_text("#corrupt pre")
    page.screenshot(path=str(ARTIFACTS / "corrupt.png"))


def test_search_and_compare_within_a_group(page, site):
    url, run = site
    episodes = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    page.goto(url + "#/episodes?run=0")
    page.wait_for_selector("#episodes-table tr[data-line]")
    page.fill("#f-q", episodes[2]["answer"][:10])
    page.wait_for_function("document.querySelectorAll('#episodes-table tr[data-line]').length === 1")
    page.locator("#episodes-table tr[data-line]").first.click()
    page.locator("a.compare-link").first.click()
    page.wait_for_selector(".compare-col")
    columns = page.locator(".compare-col")
    assert columns.count() == 2
    lines = sorted(int(columns.nth(i).get_attribute("data-line")) for i in range(2))
    assert {episodes[n - 1]["group_id"] for n in lines} == {episodes[2]["group_id"]}
    page.screenshot(path=str(ARTIFACTS / "compare.png"))
