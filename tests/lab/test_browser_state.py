"""One state across the lab (static/state.js), the guided tour (tour.js) and view 13's head
view (headview.js), in real headless Chromium: the run, text, position, layer and head live
in the address, carry from view to view, walk Back and Forward and open from a link; a run
the address names that is missing says so, and a text a run cannot encode gets an offer it
can. Also issue 39's defects 4 (view 8's lines hid key 0), 5 (view 10 on a phone), 6 (one
view's error shown in another) and 7 (the quiz's old verdict beside a new error)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from axe_playwright_python.sync_playwright import Axe

from gptlab import pretrained
from gptlab.lab.server import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
WCAG_22_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, copy_tiny_run, save_char_model):
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "a-no-space", "abcdefghijklmnopqrstuvwxyz", n_layer=1, n_head=1,
                    n_embd=8, block_size=32)
    save_char_model(root / "r-rope", "abcdefghijklmnopqrstuvwxyz", n_layer=1, n_head=1,
                    n_embd=8, block_size=32, pos_encoding="rope")
    return root


@pytest.fixture(scope="module")
def lab(runs):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pretrained, "NAMES", ())  # only this folder's runs
        with BackgroundServer(runs) as url:
            yield url


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def type_text(page, testid: str, text: str) -> None:
    page.get_by_test_id(testid).fill(text)
    page.wait_for_function("window.__inflight === 0")


def test_typing_once_carries_to_every_view_and_back_walks_the_states(lab, open_lab, settle):
    with open_lab(lab + "?run=tiny#nexttoken", "[data-testid=nt-lines]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        type_text(page, "nt-text", "the cat sat")
        page.wait_for_selector("[data-testid=nt-key-10]")
        assert query(page) == {"run": "tiny", "text": "the cat sat"}
        page.click("#tab-lens")
        page.wait_for_selector("[data-testid=lens-cell-0-10]")
        assert page.input_value("[data-testid=lens-text]") == "the cat sat"
        page.click("#tab-model")
        page.wait_for_function("document.querySelector('#wm-text').value === 'the cat sat'")
        settle(page)
        page.get_by_test_id("wm-position").select_option("4")
        settle(page)
        assert query(page)["pos"] == "4"
        page.click("#tab-heads")
        page.wait_for_function("document.querySelector('#heads-prompt').value === 'the cat sat'")
        type_text(page, "heads-prompt", "the mat")
        page.get_by_test_id("heads-prompt").press("Enter")
        settle(page)
        # Back: view 3 with the text before this burst of typing, then view 12 at position 4
        page.go_back()
        page.wait_for_function("document.querySelector('#heads-prompt').value === 'the cat sat'")
        page.go_back()
        page.wait_for_selector("#view-model", state="visible")
        settle(page)
        assert page.input_value("[data-testid=wm-position]") == "4"
        page.go_forward()
        page.go_forward()
        page.wait_for_function("document.querySelector('#heads-prompt').value === 'the mat'")
        assert query(page)["text"] == "the mat"


def test_a_link_opens_its_state(lab, open_lab, settle):
    with open_lab(lab + "?run=tiny&text=the%20mat&layer=1&head=2#heads",
                  "[data-testid=fig-head-1-2]", viewport=DESKTOP) as opened:
        page = opened.page
        settle(page)
        assert page.input_value("[data-testid=heads-prompt]") == "the mat"
        assert page.input_value("[data-testid=heads-layer]") == "1"
        assert page.input_value("[data-testid=heads-head]") == "2"
        page.click("#tab-nexttoken")
        page.wait_for_selector("[data-testid=nt-key-6]")
        settle(page)
        assert page.input_value("[data-testid=nt-layer]") == "1"
        assert page.input_value("[data-testid=nt-head]") == "2"
    with open_lab(lab + "?run=tiny&text=the%20mat&view=lens",
                  "[data-testid=lens-cell-0-6]") as opened:
        assert opened.page.input_value("[data-testid=lens-text]") == "the mat"


def test_a_missing_run_says_so_and_an_unencodable_text_gets_an_offer(lab, open_lab, settle):
    with open_lab(lab + "?run=nothere#nexttoken", "[data-testid=nt-lines]") as opened:
        note = opened.page.get_by_test_id("state-note")
        note.wait_for(state="visible")
        assert '"nothere"' in note.inner_text() and "not in the runs folder" in note.inner_text()
        assert "run" not in query(opened.page)
    with open_lab(lab + "?run=a-no-space&text=the%20cat#nexttoken",
                  "[data-testid=use-offer]") as opened:
        page = opened.page
        assert "not in the vocabulary" in page.get_by_test_id("error").inner_text()
        page.get_by_test_id("use-offer").click()
        page.get_by_test_id("error").wait_for(state="hidden")
        page.wait_for_selector("[data-testid=nt-lines]")
        assert page.input_value("[data-testid=nt-text]") == "thecat"
        assert query(page)["text"] == "thecat"


def test_an_error_stays_in_its_view(lab, open_lab, settle):
    # issue 39, defect 6: view 12's "text must not be empty" was shown in view 13
    with open_lab(lab + "?run=tiny#model", "[data-testid=fig-whole-model]") as opened:
        page = opened.page
        page.get_by_test_id("wm-text").fill("")
        page.get_by_test_id("error").wait_for(state="visible")
        message = page.get_by_test_id("error").inner_text()
        assert "empty" in message
        page.click("#tab-allheads")
        settle(page)
        assert page.is_hidden("[data-testid=error]")
        # its own error is still its own when it opens (read in the click's task: the state
        # carried back from view 13, its text and layer, then recomputes view 12 and clears it)
        assert page.evaluate("""() => { document.getElementById("tab-model").click();
            return document.getElementById("error").textContent; }""") == message


def test_the_quiz_drops_its_verdict_before_a_new_check(lab, open_lab):
    # issue 39, defect 7: "Correct." stayed beside "give an answer first"
    with open_lab(lab + "#quiz", "[data-testid=quiz-question]") as opened:
        page = opened.page
        page.get_by_test_id("quiz-kind").select_option("row0")
        page.wait_for_selector("[data-testid=quiz-choice-mask]")
        page.get_by_test_id("quiz-choice-mask").check()
        page.get_by_test_id("quiz-submit").click()
        page.get_by_test_id("quiz-verdict").wait_for()
        page.get_by_test_id("quiz-new").click()
        page.wait_for_function("!document.querySelector('[data-testid=quiz-verdict]')")
        page.get_by_test_id("quiz-submit").click()
        page.get_by_test_id("error").wait_for(state="visible")
        assert page.locator("[data-testid=quiz-verdict]").count() == 0


def test_the_tour_walks_the_chapter_from_the_keyboard(lab, open_lab, settle):
    with open_lab(lab + "?run=tiny#calc", "[data-testid=fig-q]") as opened:
        page = opened.page
        page.get_by_test_id("tour-start").focus()
        page.keyboard.press("Enter")
        page.get_by_test_id("tour").wait_for(state="visible")
        seen = []
        for _ in range(10):
            seen.append(page.evaluate("location.hash"))
            assert page.evaluate("document.activeElement.id") == "tour-title"
            if page.is_disabled("[data-testid=tour-next]"):
                break
            page.get_by_test_id("tour-next").click()
        assert seen == ["#model", "#calc", "#calc", "#model", "#heads", "#positions", "#model",
                        "#lens", "#allheads", "#nexttoken"]
        settle(page)
        assert query(page) == {"run": "tiny", "text": "the cat sat on the m"}
        page.get_by_test_id("tour-prev").click()
        assert page.evaluate("location.hash") == "#allheads"
        page.keyboard.press("Escape")
        assert page.is_hidden("[data-testid=tour]")


def lines(page, where: str = "") -> list[dict]:
    return page.eval_on_selector_all(f"[data-testid=hv-lines] line{where}", """ls => ls.map(l => ({
        q: +l.dataset.query, k: +l.dataset.key, h: +l.dataset.head, w: +l.dataset.weight}))""")


def test_the_head_view_draws_every_token_and_isolates_one(lab, open_lab, settle):
    with open_lab(lab + "?run=tiny&text=the%20cat%20sat#allheads", "[data-testid=hv-lines]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        settle(page)
        drawn = lines(page)
        assert {d["q"] for d in drawn} == set(range(11))  # every token's lines
        assert {d["h"] for d in drawn} == {0, 1, 2, 3} and all(d["k"] <= d["q"] for d in drawn)
        data = page.evaluate("fetch('/api/all_heads', {method: 'POST', headers: {'Content-Type': "
                             "'application/json'}, body: JSON.stringify({run: 'tiny', prompt: "
                             "'the cat sat'})}).then(r => r.json())")
        for d in drawn[:50]:
            assert abs(data["attention"][0][d["h"]][d["q"]][d["k"]] - d["w"]) < 1e-4
        page.get_by_test_id("hv-head-0").uncheck()
        assert {d["h"] for d in lines(page)} == {1, 2, 3}
        page.get_by_test_id("hv-query-5").focus()  # the keyboard isolates as a hover does
        assert {d["q"] for d in lines(page, ".on")} == {5}
        assert "token 'a' @5 looks most at: h1 on '" in page.get_by_test_id("hv-hover").inner_text()
        page.get_by_test_id("hv-key-0").hover()
        assert {d["k"] for d in lines(page, ".on")} == {0}
        page.get_by_test_id("hv-layer").select_option("1")
        assert query(page)["layer"] == "1"
        page.hover("[data-testid=ah-head-0-2]")  # the grid previews one head
        assert {d["h"] for d in lines(page)} == {2}
        assert "preview: layer 0, head 2" in page.get_by_test_id("hv-hover").inner_text()
        page.mouse.move(0, 0)
        assert {d["h"] for d in lines(page)} == {1, 2, 3}


def test_view_8_shows_key_0_and_its_headers(lab, open_lab):
    # issue 39, defect 4: a 512 px figure in a 460 px box, scrolled to the bottom
    with open_lab(lab + "?run=tiny#nexttoken", "[data-testid=nt-key-0]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        box = page.locator("#nt-lines").bounding_box()
        for what in ("[data-testid=nt-key-0]", "#nt-lines .nt-axis"):
            r = page.locator(what).first.bounding_box()
            assert r["y"] >= box["y"] and r["y"] + r["height"] <= box["y"] + box["height"], what
        assert page.evaluate("(b => b.scrollHeight <= b.clientHeight)"
                             "(document.getElementById('nt-lines'))")


def test_view_10_on_a_phone_keeps_its_row_labels(lab, open_lab):
    # issue 39, defect 5: at 390 px the grid scrolled to its last column, the row labels
    # scrolled away and the note sat in a blank band inside the scroller
    with open_lab(lab + "?run=tiny#lens", "[data-testid=lens-cell-0-0]", viewport=PHONE) as opened:
        page = opened.page
        grid = page.locator("#lens-grid")
        # it still opens on the last column (the model's own prediction)
        assert page.evaluate("document.getElementById('lens-grid').scrollLeft") > 0
        g = grid.bounding_box()
        label = page.locator("#lens-grid tbody th").last.bounding_box()
        assert g["x"] <= label["x"] < g["x"] + 10
        assert page.locator("#lens-grid [data-testid=lens-embed-note]").count() == 0
        note = page.get_by_test_id("lens-embed-note").bounding_box()
        assert note["y"] >= g["y"] + g["height"] and note["width"] <= PHONE["width"]


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px", "1280px"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_what_this_adds_passes_axe(lab, open_lab, settle, viewport, scheme):
    with open_lab(lab + "?run=tiny#allheads", "[data-testid=hv-lines]", viewport=viewport,
                  color_scheme=scheme) as opened:
        page = opened.page
        page.goto(lab + "?run=nothere#allheads")
        page.get_by_test_id("state-note").wait_for(state="visible")
        page.wait_for_selector("[data-testid=hv-lines]")
        page.get_by_test_id("tour-start").click()  # the tour's panel stays over every view
        page.get_by_test_id("tour").wait_for(state="visible")
        settle(page)
        for view in ("allheads", "nexttoken", "lens", "quiz"):
            page.click(f"#tab-{view}")
            settle(page)
            page.eval_on_selector_all("svg[role=img]", "ss => ss.forEach(s => s.replaceChildren())")
            found = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_22_AA},
                                             "resultTypes": ["violations"]}).response["violations"]
            assert not [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in found], view
            wide = page.evaluate("document.documentElement.scrollWidth"
                                 " - document.documentElement.clientWidth")
            assert wide <= 0, view


def test_view_8_opens_every_tokens_lines_in_the_head_view(lab, open_lab, settle):
    with open_lab(lab + "?run=tiny&text=the%20cat#nexttoken", "[data-testid=nt-key-6]") as opened:
        page = opened.page
        page.get_by_test_id("nt-layer").select_option("1")
        page.get_by_test_id("nt-headview").click()
        page.wait_for_selector("[data-testid=hv-lines] [data-testid=hv-query-6]")
        settle(page)
        assert page.input_value("[data-testid=ah-prompt]") == "the cat"
        assert page.input_value("[data-testid=hv-layer]") == "1"
        # view 8's lines are the head view's last row, weight for weight
        last = [d for d in lines(page) if d["q"] == 6]
        assert last and {d["k"] for d in last} <= set(range(7))


def test_view_4_keeps_its_own_run_and_says_what_it_needs(lab, open_lab, settle):
    # regression: view 4 followed the address's run into "has rope positions, not a learned
    # table", though it keeps its own
    with open_lab(lab + "?run=r-rope#positions", "[data-testid=fig-learned-table]") as opened:
        page = opened.page
        settle(page)
        assert page.input_value("[data-testid=lp-run]") == "a-no-space"
        assert page.is_hidden("[data-testid=error]")
        assert query(page)["run"] == "r-rope"  # the address's run is the other views'
        page.get_by_test_id("lp-run").select_option("r-rope")
        error = page.get_by_test_id("error")
        error.wait_for(state="visible")
        assert "has rope positions, not a learned table: this needs a run trained with " \
               "pos_encoding 'learned'" in error.inner_text()


def test_a_link_between_views_writes_the_state_it_opens(lab, open_lab, settle):
    # regression: L1H3 clicked in view 13 opened view 3 at layer 1, head 3, but the address
    # kept view 13's state until the next pick
    with open_lab(lab + "?run=tiny&text=the%20cat#allheads", "[data-testid=ah-head-1-3]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        settle(page)
        page.click("[data-testid=ah-head-1-3]")
        assert query(page) == {"run": "tiny", "text": "the cat", "layer": "1", "head": "3"}
        assert page.evaluate("location.hash") == "#heads"
        page.wait_for_selector("[data-testid=fig-head-1-3]")
        settle(page)
        assert page.input_value("[data-testid=heads-layer]") == "1"
        assert page.input_value("[data-testid=heads-head]") == "3"
        page.go_back()  # view 13, as it was
        page.wait_for_selector("#view-allheads", state="visible")
        assert "head" not in query(page)
        # view 8's links: every token's lines (view 13, its layer) and why this token (view 10)
        page.click("#tab-nexttoken")
        page.wait_for_selector("[data-testid=nt-key-6]")
        settle(page)
        page.get_by_test_id("nt-layer").select_option("1")
        type_text(page, "nt-text", "the mat")
        page.wait_for_selector("[data-testid=nt-key-6]")
        page.get_by_test_id("nt-headview").click()
        assert page.evaluate("location.hash") == "#allheads"
        assert query(page)["layer"] == "1" and query(page)["text"] == "the mat"
        page.wait_for_selector("[data-testid=hv-lines]")
        settle(page)
        page.click("#tab-nexttoken")
        settle(page)
        page.get_by_test_id("nt-attribute").click()
        assert page.evaluate("location.hash") == "#lens"
        assert query(page)["text"] == "the mat"
        settle(page)


def test_back_to_an_entry_without_a_key_shows_its_default(lab, open_lab, settle):
    # regression: Back to an address without layer (or text) kept the newer pick on screen
    with open_lab(lab + "?run=tiny#heads", "[data-testid=fig-head-0-0]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        settle(page)
        page.get_by_test_id("heads-layer").select_option("1")
        page.wait_for_selector("[data-testid=fig-head-1-0]")
        settle(page)
        assert query(page)["layer"] == "1"
        page.go_back()
        page.wait_for_selector("[data-testid=fig-head-0-0]")
        settle(page)
        assert "layer" not in query(page)
        assert page.input_value("[data-testid=heads-layer]") == "0"
        page.go_forward()
        page.wait_for_selector("[data-testid=fig-head-1-0]")
        assert page.input_value("[data-testid=heads-layer]") == "1"
    with open_lab(lab + "?run=tiny#nexttoken", "[data-testid=nt-key-6]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        default = page.input_value("[data-testid=nt-text]")
        type_text(page, "nt-text", "the mat")
        page.get_by_test_id("nt-head").select_option("1")
        assert query(page) == {"run": "tiny", "text": "the mat", "head": "1"}
        page.go_back()
        page.wait_for_function("document.querySelector('#nt-head').value === 'all'")
        page.go_back()
        page.wait_for_function(f"document.querySelector('#nt-text').value === {default!r}")
        assert query(page) == {"run": "tiny"}
        settle(page)


def test_view_8_writes_no_head_all_unless_picked_over_a_head(lab, open_lab, settle):
    # regression: leaving view 8 wrote head=all (and layer=0), its untouched defaults
    with open_lab(lab + "?run=tiny#nexttoken", "[data-testid=nt-key-6]",
                  viewport=DESKTOP) as opened:
        page = opened.page
        settle(page)
        page.click("#tab-lens")
        page.wait_for_selector("[data-testid=lens-dla]")
        assert "head" not in query(page) and "layer" not in query(page)
        page.click("#tab-nexttoken")
        settle(page)
        page.get_by_test_id("nt-head").select_option("2")
        assert query(page)["head"] == "2"
        page.get_by_test_id("nt-head").select_option("all")  # all heads: the default again
        assert "head" not in query(page)
        page.click("#tab-heads")  # view 3 shows its default too: the grid
        page.wait_for_selector("[data-testid=fig-head-0-1]")
        assert page.input_value("[data-testid=heads-head]") == "all"
        settle(page)


def test_the_head_view_names_positions_and_shows_one_head_at_a_time(lab, open_lab, settle):
    # regression: the hover named tokens without their position ("h0 on \"t\"": which t?)
    with open_lab(lab + "?run=tiny&text=the%20cat%20sat%20on%20the%20mat#allheads",
                  "[data-testid=hv-lines]", viewport=DESKTOP) as opened:
        page = opened.page
        settle(page)
        data = page.evaluate("fetch('/api/all_heads', {method: 'POST', headers: {'Content-Type': "
                             "'application/json'}, body: JSON.stringify({run: 'tiny', prompt: "
                             "'the cat sat on the mat'})}).then(r => r.json())")
        page.get_by_test_id("hv-query-12").focus()
        said = page.get_by_test_id("hv-hover").inner_text()
        assert said.startswith("token 'o' @12 looks most at: ")
        for h in range(4):
            row = data["attention"][0][h][12]
            j = row.index(max(row))
            assert f"h{h} on '{data['tokens'][j].replace(' ', '␣')}' @{j}" in said, (h, said)
        page.get_by_test_id("hv-key-4").focus()  # as a key: the query that weighs it most
        said = page.get_by_test_id("hv-hover").inner_text()
        column = [r[4] for r in data["attention"][0][0]]
        q = column.index(max(column))
        assert said.startswith("token 'c' @4 as a key, largest weight: h0 ")
        assert f"h0 {column[q]:.2f} from '{data['tokens'][q].replace(' ', '␣')}' @{q}" in said
        # one head at a time (Transformer Explainer's way): radio buttons, one head's lines
        page.get_by_test_id("hv-head-0").uncheck()
        page.get_by_test_id("hv-one").check()
        assert {d["h"] for d in lines(page)} == {1}  # the first head shown stays
        assert page.get_attribute("[data-testid=hv-head-1]", "type") == "radio"
        page.get_by_test_id("hv-head-3").check()
        assert {d["h"] for d in lines(page)} == {3}
        page.get_by_test_id("hv-head-2").focus()
        page.keyboard.press("Space")
        assert {d["h"] for d in lines(page)} == {2}
        page.get_by_test_id("hv-one").uncheck()  # back to the heads switched on before
        assert {d["h"] for d in lines(page)} == {1, 2, 3}
        assert page.get_attribute("[data-testid=hv-head-1]", "type") == "checkbox"
