"""Screenshots of every view of the lab, for the docs: `python -m tools.screenshots`.

A developer tool, not part of the package: it needs Playwright and a Chromium (Debian's
/usr/bin/chromium by default, as `make test` installs it; --chromium PATH for another).
Starts the lab on a free 127.0.0.1 port, opens it in headless Chromium and writes one PNG
per view. Without --runs it trains a tiny model first (a few seconds), so the model views
have something to show. tests/lab/test_browser.py drives the same views.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.parse
from pathlib import Path

from gptlab.errors import GptlabError, UsageError

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
# (file name, tab, what to wait for, what to do first)
VIEWS = [
    ("1-attention-qkv", "calc", "fig-q", []),
    ("1-attention-mask", "calc", "fig-masked", ["calc-next", "calc-next"]),
    ("1-attention-weights", "calc", "fig-weights", ["calc-next"]),
    ("2-scaling", "scaling", "fig-scaling-sweep", []),
    ("3-heads", "heads", "fig-concat", []),
    ("4-positions", "positions", "fig-rope-scores", []),
    ("5-params", "params", "fig-params-breakdown", []),
    ("6-head-scores", "scores", "fig-scores-induction", []),
    ("7-quiz", "quiz", "quiz-question", []),
    ("8-next-token", "nexttoken", "nt-lines", []),
    ("10-logit-lens", "lens", "lens-dla", []),
    ("11-longer-than-trained", "context", "fig-ctx-experiment", []),
    ("12-whole-model", "model", "fig-whole-model", []),
    ("12-attention-steps", "model", "fig-whole-model", []),
    ("13-every-head", "allheads", "fig-all-heads", []),
    ("13-head-view", "allheads", "hv-lines", []),
    ("4-learned-positions", "positions", "fig-learned-sim", []),
    ("14-experiments", "experiments", "exp-claims", []),
    ("15-features", "features", "feat-along-token", []),
]
LIVE_VIEW = "9-watch-it-learn"  # a training from the page: only with live_steps (minutes)
STEPS_POSITION = 8  # view 12's stages follow this token: a few later ones are masked


def with_query(url: str, **params: object) -> str:
    """url with params added to its query string (a ?run= already there kept)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.urlencode([*urllib.parse.parse_qsl(parts.query), *params.items()])
    return urllib.parse.urlunsplit(parts._replace(query=query, fragment=""))


def capture(url: str, out_dir: Path, chromium: str = CHROMIUM,
            live_steps: int | None = None, only: list[str] | None = None) -> list[Path]:
    """One PNG per view of the lab served at url, in a fresh headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            return capture_views(browser.new_page(), url, out_dir, live_steps, only)
        finally:
            browser.close()


def capture_views(page, url: str, out_dir: Path, live_steps: int | None = None,
                  only: list[str] | None = None) -> list[Path]:
    """Screenshot every view (or those whose file names start with one of `only`) with a
    Playwright page (sync API); with live_steps, also the live view after an induction
    training of that many steps started from the page."""
    out_dir.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 860})
    page.goto(url)
    written = []
    for name, tab, ready, clicks in VIEWS:
        if only and not name.startswith(tuple(only)):
            continue
        page.click(f"#tab-{tab}")
        for button in clicks:
            page.click(f"#{button}")
        page.wait_for_selector(f"[data-testid={ready}]")
        if tab == "quiz":  # show a checked answer with its worked solution
            page.select_option("#quiz-kind", "row0")
            page.click("#quiz-new")
            page.check("[data-testid=quiz-choice-mask]")
            page.click("#quiz-submit")
            page.wait_for_selector("[data-testid=quiz-verdict]")
        if tab == "nexttoken":  # a hot temperature and both cuts; one token hovered
            page.fill("#nt-text", "the dog sat on the l")
            for slider, value in (("temp", "2"), ("topk", "8"), ("topp", "0.9")):
                with page.expect_response("**/api/next_token"):
                    page.fill(f"#nt-{slider}", value)
            page.select_option("#nt-layer", "1")
            page.hover("[data-testid=nt-key-15]")
        if tab == "lens":  # block 0 at the last position: its top tokens open
            page.click("[data-testid^=lens-cell-1-] >> nth=-1")  # any run, any tokenizer
        if name == "12-whole-model":  # block 0 open, its FFN's numbers beside the diagram
            page.click("[data-testid=wm-stage-block-0]")
            page.click("[data-testid=wm-stage-ffn-0]")
            page.wait_for_selector("[data-testid=wm-ffn-fired]")
        if name == "12-attention-steps":  # block 0's attention at a token with later ones,
            # so that the mask stage masks something (the last token, the default, has none)
            page.goto(with_query(url, pos=STEPS_POSITION) + "#model")
            page.wait_for_selector(f"[data-testid={ready}]")
            page.click("[data-testid=wm-stage-block-0]")
            page.click("[data-testid=wm-stage-attn-0]")
            page.wait_for_selector("[data-testid=wm-steps-figures]")
        if name == "12-attention-steps":  # block 0's attention, walked to its softmax row
            for _ in range(3):
                stage = page.get_attribute("[data-testid=wm-steps-figures]", "data-stage")
                page.click("[data-testid=wm-steps-next]")
                page.wait_for_selector(
                    f"[data-testid=wm-steps-figures]:not([data-stage='{stage}'])")
        if name == "13-head-view":  # below the grid: one layer's lines, one token isolated
            page.eval_on_selector("#hv-title", "e => { e.scrollIntoView(); scrollBy(0, -90); }")
            page.hover("[data-testid=hv-query-12]")
        if name == "4-learned-positions":  # further down view 4: the run's own table
            page.locator("[data-testid=lp-summary]").scroll_into_view_if_needed()
        if name == "12-attention-steps":  # the steps alone, their fade-in finished
            page.wait_for_function(
                "document.getAnimations().every(a => a.playState !== 'running')")
            page.eval_on_selector("[data-testid=wm-steps-figures]",  # below the sticky tabs
                                  "e => e.scrollIntoView({block: 'center'})")
        path = out_dir / f"{name}.png"
        page.screenshot(path=str(path), full_page=name in ("10-logit-lens", "12-whole-model"))
        written.append(path)
    if live_steps is not None:
        page.click("#tab-live")
        page.fill("#live-steps", str(live_steps))
        page.click("#live-start")
        page.wait_for_selector("[data-testid=live-status][data-status]",
                               timeout=1000 * (60 + live_steps))
        path = out_dir / f"{LIVE_VIEW}.png"
        page.screenshot(path=str(path), full_page=True)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.screenshots",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/screenshots", help="folder for the PNGs")
    parser.add_argument("--runs", help="runs folder (default: train a tiny run in a temp dir)")
    parser.add_argument("--chromium", default=CHROMIUM, help="Chromium executable")
    parser.add_argument("--live-steps", type=int, default=1500,
                        help="steps of the live induction training shown (0: skip that view)")
    parser.add_argument("--run", metavar="NAME",
                        help="the run the views open on (?run=NAME; default: the lab's own "
                             "choice, the shipped model first)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="only the views whose file names start with these, e.g. 12 13 "
                             "4-learned (the live view then only if 9 is named)")
    args = parser.parse_args(argv)
    from gptlab.lab.server import BackgroundServer
    from tools.tinyrun import make_tiny_run

    try:
        with tempfile.TemporaryDirectory() as tmp:
            runs = args.runs
            if runs is None:
                runs = Path(tmp) / "runs"
                make_tiny_run(runs / "tiny-cat", steps=200)
            if not Path(args.chromium).exists():
                raise UsageError(f"Chromium not found at {args.chromium} (--chromium PATH)")
            with BackgroundServer(runs) as url:
                if args.run:
                    url += f"?run={args.run}"
                live = args.live_steps or None
                if args.only and not any(LIVE_VIEW.startswith(o) for o in args.only):
                    live = None
                for path in capture(url, Path(args.out), args.chromium, live, args.only):
                    print(path)
    except GptlabError as exc:
        print(f"screenshots: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
