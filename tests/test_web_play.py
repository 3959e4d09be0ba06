"""Play in the browser (agents/web_play.py, models/play.py): the JSON API's answers to bad input, a seat
that sees only its own events, and whole games in headless Chromium (Debian's, driven by playwright)
against a code agent and against the tiny model served by vLLM through the rollout proxy; every game ends
up in the episode tables. A model sits where it was trained unless the person picks a seat; a forfeited turn
and a slow opponent's start say so on the page."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agents.web_play import CodeOpponents, GameRoom, OpponentOption, PlayError, create_app, default_seat
from environments.core.events import RAW_TEXT, Action
from models.play import ModelOpponents, ModelServing, record_played_episode
from models.serving.process import ServerThread
from models.storage import TableStore

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip


@contextmanager
def serve(app) -> Iterator[str]:
    """The app on a free loopback port in a background thread (uvicorn's own event loop)."""
    with ServerThread(app, name="play server") as served:
        yield served.url


@pytest.fixture
def code_server(tmp_path: Path) -> Iterator[tuple[str, TableStore]]:
    store = TableStore(tmp_path / "tables")
    app = create_app([CodeOpponents()], record=lambda result: record_played_episode(store, result, "play-test"))
    with serve(app) as url:
        yield url, store


def new_page(browser):
    """A page whose script errors fail the test."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.script_errors = errors
    return page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (make browser installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def wait_for_state(url: str, game_id: str, predicate, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = httpx.get(f"{url}/api/games/{game_id}").json()
        if predicate(state):
            return state
        assert time.monotonic() < deadline, f"game {game_id} stuck: {state['status']} {state['error']}"
        time.sleep(0.05)


# ----------------------------------------------------------------------------------------------- API
def test_bad_choices_get_a_clear_4xx_message(code_server) -> None:
    url, _ = code_server
    envs = {e["env_id"]: e for e in httpx.get(f"{url}/api/environments").json()}
    assert set(envs) == {
        "dnd-v0", "casino-v0", "craigslist-v0", "marketplace-v0", "job-interview-v0", "calendar-v0", "red-black-v0"
    }  # fmt: skip
    assert {o["name"] for o in envs["craigslist-v0"]["opponents"]} == {
        "boulware", "conceder", "reciprocal", "accommodating", "random"
    }  # fmt: skip
    assert "tit_for_tat" in {o["name"] for o in envs["red-black-v0"]["opponents"]}
    assert envs["red-black-v0"]["seats"][:2] == ["A0", "A1"]

    def start(**body) -> httpx.Response:
        return httpx.post(f"{url}/api/games", json=body)

    cases = [
        ({"env_id": "poker-v0", "opponent": "boulware"}, 400, "unknown environment 'poker-v0'"),
        ({"env_id": "craigslist-v0", "seat": "judge", "opponent": "boulware"}, 400, "unknown seat 'judge'"),
        ({"env_id": "craigslist-v0", "opponent": "grandmaster"}, 400, "unknown opponent 'grandmaster'"),
        ({"env_id": "craigslist-v0", "opponent": "models:/nope@champion"}, 400, "models:/<name>@<alias>"),
        ({"env_id": "red-black-v0", "opponent": "boulware"}, 400, "cannot play red-black-v0"),
        ({"env_id": "craigslist-v0", "opponent": "boulware", "seed": -1}, 400, "seed"),
    ]
    for body, status, message in cases:
        response = start(**body)
        assert response.status_code == status and message in response.json()["error"], (body, response.text)
    assert start(env_id="craigslist-v0").status_code == 422  # no opponent: FastAPI's own 4xx
    missing = httpx.get(f"{url}/api/games/nope")
    assert missing.status_code == 404 and "no game 'nope'" in missing.json()["error"]


def test_a_seat_sees_only_its_own_events_and_moves_are_checked(code_server) -> None:
    url, store = code_server
    game = httpx.post(f"{url}/api/games", json={"env_id": "craigslist-v0", "seat": "buyer", "opponent": "boulware"})
    game_id = game.json()["game_id"]
    state = wait_for_state(url, game_id, lambda s: s["your_turn"])
    assert httpx.post(f"{url}/api/games/{game_id}/moves", json={"text": "  "}).status_code == 400
    assert httpx.post(f"{url}/api/games/{game_id}/moves", json={"text": "x" * 5000}).status_code == 400
    # The buyer sees its own private target and the first half of the description, never the seller's view.
    opening = state["events"][0]
    assert opening["private"] and "target price" in opening["text"]
    seller_only = httpx.get(f"{url}/api/games/{game_id}").json()
    assert all("Your target is the listing price" not in e["text"] for e in seller_only["events"])
    assert httpx.post(f"{url}/api/games/{game_id}/moves", json={"text": "QUIT"}).status_code == 202
    done = wait_for_state(url, game_id, lambda s: s["done"] and s["outcome"]["recorded"])
    assert done["outcome"]["agreement"] is False
    late = httpx.post(f"{url}/api/games/{game_id}/moves", json={"text": "hello"})
    assert late.status_code == 409 and "finished" in late.json()["error"]
    rows = store.query("SELECT agent_id, agent_name FROM episode_roles ORDER BY agent_id")
    assert rows.values.tolist()[0] == ["buyer", "web-human"]


def test_a_red_black_game_keeps_the_other_team_out_of_sight() -> None:
    async def play() -> tuple[dict, list[dict]]:
        room = GameRoom([CodeOpponents()])
        game = room.start("red-black-v0", "A0", "always_defect", 1)
        with pytest.raises(PlayError, match="not your turn"):
            game.human.submit("I vote BLACK.")
        while game.status not in ("finished", "failed"):
            await asyncio.sleep(0.005)
            if game.human.pending is not None:
                room.move(game.game_id, "VOTE: BLACK" if "vote" in game.human.pending.allowed else "I vote BLACK.")
        return game.view(), game.human.events

    view, events = asyncio.run(play())
    assert view["status"] == "finished" and view["outcome"]["rounds"] == 10
    senders = {e.get("sender") for e in events if e["kind"] == "observation"}
    assert senders <= {None, "A1", "A2", "A3", "A4"}  # team B's discussion never reaches team A
    assert sum(e["kind"] == "you" for e in events) == 20  # one opinion and one vote per round


# ------------------------------------------------------------------------------------------- browser
def play_in_page(page, moves, timeout_ms: int = 60_000) -> str:
    """Answer each turn the page offers with the next move until the outcome shows; returns its text."""
    for move in moves:
        page.wait_for_function(
            "() => !document.getElementById('move').disabled || !document.getElementById('outcome').hidden",
            timeout=timeout_ms,
        )
        if page.is_visible("#outcome"):
            break
        # A model opponent on a loaded machine may take longer than Playwright's 30 s default to answer.
        page.fill("#move", move, timeout=timeout_ms)
        page.click("#send", timeout=timeout_ms)
    page.wait_for_selector("#outcome:not([hidden])", timeout=timeout_ms)
    return page.inner_text("#outcome")


def test_a_full_craigslist_game_against_a_code_agent_in_the_browser(code_server, browser) -> None:
    url, store = code_server
    page = new_page(browser)
    try:
        page.goto(f"{url}/?env=craigslist-v0&seat=buyer&opponent=boulware&seed=4")
        page.wait_for_selector("#env option", state="attached")
        assert page.input_value("#seat") == "buyer" and page.input_value("#opponent") == "boulware"
        page.click("#start")
        page.wait_for_selector("#log li.private")
        private = page.inner_text("#log li.private")
        listing = float(re.search(r"listed at \$([\d.]+)", private).group(1))
        assert "Your private target price" in private
        assert "OFFER $<price>" in page.inner_text("#intro") or "OFFER" in page.inner_text("#intro")
        # An invalid move first (nothing to accept yet): the environment says so, and the turn comes back.
        page.wait_for_function("() => !document.getElementById('move').disabled")
        page.fill("#move", "ACCEPT")
        page.click("#send")
        page.wait_for_selector("#log li.invalid_action")
        # Markup in a move is shown as text, not run.
        outcome = play_in_page(page, [f"<b>Nice bike</b><script>window.pwned=1</script> OFFER ${listing:g}"] * 3)
        assert "Agreement: yes" in outcome and "Your reward: 0.000" in outcome and "Recorded as episode" in outcome
        assert page.evaluate("() => window.pwned === undefined")
        assert page.locator("#log li.you").count() == 2  # each event once, however the refreshes overlap
        assert "<script>window.pwned=1</script>" in page.inner_text("#log")
        text = page.inner_text("body")
        assert "Your target is the listing price" not in text  # the seller's private view never reaches the page
        episode_id = re.search(r"episode (play:\S+)", outcome).group(1)
        assert page.script_errors == []
    finally:
        page.close()
    episodes = store.query("SELECT agreement, deal, agents FROM episodes WHERE episode_id = ?", [episode_id])
    assert episodes.agreement.tolist() == [True] and f'"price": {listing}' in episodes.deal[0]
    turns = store.query(
        "SELECT agent_id, kind FROM episode_turns WHERE episode_id = ? ORDER BY turn_index", [episode_id]
    )
    assert turns.values.tolist() == [["buyer", "offer"], ["seller", "accept"]]
    assert store.query("SELECT count(*) AS n FROM transcripts WHERE episode_id = ?", [episode_id]).n[0] == 2


class Stumbler:
    """A test opponent whose first reply to every turn request is refused (an offer without a price, with a
    draft it never meant to send), and whose retry offers the listing price."""

    def __init__(self) -> None:
        self.tries = 0

    async def reset(self, agent_id: str, env_id: str, spec, episode_id: str) -> None:
        self.agent_id = agent_id

    async def observe(self, event) -> None:
        pass

    async def act(self, request) -> Action:
        self.tries += 1
        text = "OFFER $ (draft: my floor is secret-floor)" if self.tries % 2 else "Fine. OFFER $400"
        return Action(self.agent_id, RAW_TEXT, text)


class StumblingOpponents:
    """An opponent provider for the page: `stumbler` in Craigslist."""

    def handles(self, name: str) -> bool:
        return name == "stumbler"

    def options(self, env_id: str) -> list[OpponentOption]:
        return [OpponentOption("stumbler", "stumbler (test)", "code")] if env_id == "craigslist-v0" else []

    def check(self, env_id: str, name: str) -> None:
        if env_id != "craigslist-v0":
            raise PlayError("stumbler plays Craigslist only")

    async def make_agents(self, env_id: str, name: str, seats, seed: int) -> dict:
        return {seat: Stumbler() for seat in seats}

    def note(self, env_id: str, name: str, seats) -> str:
        return ""

    def trained_seat(self, env_id: str, name: str) -> str:
        return ""

    def preparing(self, name: str) -> str:
        return ""


def test_the_page_shows_every_attempt_and_how_a_move_was_read(browser, tmp_path: Path) -> None:
    store = TableStore(tmp_path / "tables")
    app = create_app([StumblingOpponents()], record=lambda result: record_played_episode(store, result, "play-test"))
    with serve(app) as url:
        page = new_page(browser)
        try:
            page.goto(f"{url}/?env=craigslist-v0&seat=buyer&opponent=stumbler&seed=4")
            page.wait_for_selector("#env option", state="attached")
            page.click("#start")
            outcome = play_in_page(page, ["ACCEPT", "Hello. OFFER $50", "QUIT"])
            assert "Agreement: no" in outcome
            log = page.inner_text("#log")
            # The person's own move, as the environment read it.
            assert page.locator("#log li.parsed").count() == 2  # the offer and the quit
            assert 'The game read your move as: offer {"price": 50.0}' in page.inner_text("#log li.parsed >> nth=0")
            # The opponent's refused replies, with the reason, but not their text while the game runs.
            refused = page.locator("#log li.refused")
            assert refused.count() == 1
            assert "seller's reply was refused: `OFFER` needs a price" in refused.nth(0).inner_text()
            assert "secret-floor" not in log
            # Order: the refusal comes before the seller's accepted offer it led to.
            assert log.index("seller's reply was refused") < log.index("$400")
            # After the game: every attempt of both seats, texts and reasons included.
            record = page.locator("#record tbody tr")
            rows = [record.nth(k).inner_text() for k in range(record.count())]
            assert page.is_visible("#record") and len(rows) == 5  # ACCEPT, OFFER $50, refused, OFFER $400, QUIT
            assert "ACCEPT" in rows[0] and "not allowed now" in rows[0]
            assert 'offer {"price": 50.0}' in rows[1]
            assert "secret-floor" in rows[2] and "needs a price" in rows[2]
            assert 'offer {"price": 400.0}' in rows[3] and "quit" in rows[4]
            assert page.locator("#record tr.refused").count() == 2
            assert page.script_errors == []
        finally:
            page.close()
    # The same attempts are in the tables (the `attempts` view).
    stored = store.query("SELECT speaker, accepted FROM attempts ORDER BY attempt_index")
    assert stored.values.tolist() == [
        ["buyer", False], ["buyer", True], ["seller", False], ["seller", True], ["buyer", True]
    ]  # fmt: skip


def test_the_page_shows_bad_choices(code_server, browser) -> None:
    url, _ = code_server
    page = new_page(browser)
    try:
        page.goto(f"{url}/?env=craigslist-v0")
        page.wait_for_selector("#env option", state="attached")
        page.fill("#opponent-uri", "models:/no-such-model@champion")
        page.click("#start")
        page.wait_for_function("() => document.getElementById('error').textContent.length > 0")
        assert "unknown opponent 'models:/no-such-model@champion'" in page.inner_text("#error")
        assert page.is_hidden("#game") and page.script_errors == []
    finally:
        page.close()


# ------------------------------------------------------------------------------------ the tiny model
@pytest.fixture
def registered_tiny(tiny_lora_adapter: Path, tmp_path: Path) -> Iterator[object]:
    """A sqlite MLflow registry holding the tiny model's LoRA adapter as play-tiny v1 (alias champion)."""
    from models.tracking import Tracker, TrackingConfig

    shm = Path("/dev/shm")
    db_dir = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    tracker = Tracker(TrackingConfig(tracking_uri=f"sqlite:///{db_dir}/m.db", artifact_root=str(tmp_path / "art")))
    with tracker.start_run("play-tiny") as run:
        run.log_artifact_dir(tiny_lora_adapter, "adapter")
    version = tracker.register_adapter(run.run_id, "adapter", "play-tiny")
    tracker.promote_if_better("play-tiny", version, "mean_reward", 0.5)
    try:
        yield tracker
    finally:
        shutil.rmtree(db_dir, ignore_errors=True)


@pytest.mark.slow
def test_a_game_against_the_tiny_model_in_the_browser(vllm_engine, registered_tiny, browser, tmp_path: Path) -> None:
    from models.serving.proxy import ProxyConfig, ProxyThread

    store = TableStore(tmp_path / "tables")
    proxy_config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,  # the session engine has a token, like the pipeline's
        table_root=store.root,
        base_models=("tiny",),
        port=0,
        flush_interval_s=0.5,
    )
    with ProxyThread(proxy_config) as proxy:
        models = ModelOpponents(
            registered_tiny, lambda: ModelServing(vllm_engine.client, proxy.base_url, "tiny"), max_new_tokens=12
        )
        app = create_app([CodeOpponents(), models], record=lambda r: record_played_episode(store, r, "play-test"))
        with serve(app) as url:
            names = {o["name"] for e in httpx.get(f"{url}/api/environments").json() for o in e["opponents"]}
            assert {"base", "models:/play-tiny@champion", "models:/play-tiny@candidate"} <= names
            bad = httpx.post(f"{url}/api/games", json={"env_id": "craigslist-v0", "opponent": "models:/play-tiny@gold"})
            assert bad.status_code == 400 and "unknown model alias" in bad.json()["error"]
            page = new_page(browser)
            try:
                page.goto(f"{url}/?env=craigslist-v0&seat=buyer&opponent=models:/play-tiny@champion")
                page.wait_for_selector("#env option", state="attached")
                assert page.input_value("#opponent") == "models:/play-tiny@champion"
                page.click("#start")
                outcome = play_in_page(page, ["Hello there. OFFER $50", "QUIT", "QUIT", "QUIT"], timeout_ms=120_000)
                episode_id = re.search(r"episode (play:\S+)", outcome).group(1)
                assert "Agreement: no" in outcome
                # The model's reply reached the seat as the seller's move.
                assert page.locator("#log li", has_text="The seller").count() >= 1
                assert page.script_errors == []
            finally:
                page.close()
    # The proxy stopped (flushed): the model's calls are recorded with the episode id and the adapter name.
    calls = store.query(
        "SELECT agent_id, model, adapter_version FROM recorded_calls WHERE episode_id = ?", [episode_id]
    )
    assert len(calls) >= 1 and set(calls.agent_id) == {"seller"}
    assert set(calls.model) == {"play-tiny-v1"} and set(calls.adapter_version) == {"play-tiny-v1"}
    roles = store.query(
        "SELECT agent_id, agent_name FROM episode_roles WHERE episode_id = ? ORDER BY agent_id", [episode_id]
    )
    assert roles.agent_name.tolist()[0] == "web-human" and "play-tiny-v1" in roles.agent_name.tolist()[1]


# ------------------------------------------------------------------------ what a model was trained for
@pytest.fixture
def documented_registry(tiny_lora_adapter: Path, tmp_path: Path) -> object:
    """A sqlite registry whose champion socialrl-craigslist-specialist v1 is documented as a Craigslist buyer."""
    from models.tracking import ModelCard, Tracker, TrackingConfig

    tracker = Tracker(TrackingConfig(f"sqlite:///{tmp_path}/m.db", str(tmp_path / "art")))
    with tracker.start_run("ppo-craigslist-v0") as run:
        run.log_artifact_dir(tiny_lora_adapter, "adapter")
    name = "socialrl-craigslist-specialist"
    version = tracker.register_adapter(run.run_id, "adapter", name)
    card = ModelCard(name, "tiny-random-llama", "craigslist-v0", "smoke", "PPO", "teacher traces", seat="buyer")
    tracker.document_version(name, version, card)
    tracker.promote_if_better(name, version, "mean_reward", 0.5)
    return tracker


def no_engine():
    raise RuntimeError("no engine in this test")


def test_the_page_says_what_a_model_was_trained_for_and_refuses_unknown_choices(documented_registry, browser) -> None:
    champion = "models:/socialrl-craigslist-specialist@champion"
    models = ModelOpponents(documented_registry, no_engine)
    app = create_app([CodeOpponents(), models])
    with serve(app) as url:
        envs = {e["env_id"]: e for e in httpx.get(f"{url}/api/environments").json()}
        (listed,) = [o for o in envs["dnd-v0"]["opponents"] if o["name"] == champion]
        assert listed["trained"] == "craigslist-v0 as buyer" and listed["seat"] == "buyer"
        assert "trained on craigslist-v0 as buyer" in listed["label"] and "outside its training" in listed["label"]
        # The server warns too (a typed model URI is not in the list).
        game = httpx.post(f"{url}/api/games", json={"env_id": "dnd-v0", "opponent": champion}).json()
        assert "trained on craigslist-v0 as buyer; here it plays" in game["warning"]
        seller = httpx.post(f"{url}/api/games", json={"env_id": "craigslist-v0", "seat": "buyer", "opponent": champion})
        assert "trained as buyer in craigslist-v0; here it plays seller" in seller.json()["warning"]
        buyer = httpx.post(f"{url}/api/games", json={"env_id": "craigslist-v0", "seat": "seller", "opponent": champion})
        assert buyer.json()["warning"] == ""
        page = new_page(browser)
        try:
            # An unknown environment or seat in the address is refused with a message, not switched silently.
            page.goto(f"{url}/?env=poker-v0&opponent=boulware")
            page.wait_for_function("() => document.getElementById('error').textContent.length > 0")
            assert "Unknown environment 'poker-v0'" in page.inner_text("#error") and page.is_disabled("#start")
            page.select_option("#env", "craigslist-v0")
            assert page.inner_text("#error") == "" and page.is_enabled("#start")
            page.goto(f"{url}/?env=craigslist-v0&seat=judge&opponent=boulware")
            page.wait_for_function("() => document.getElementById('error').textContent.length > 0")
            assert "Unknown seat 'judge' in craigslist-v0" in page.inner_text("#error") and page.is_disabled("#start")
            assert "buyer, seller" in page.inner_text("#error")
            # What the model was trained for, and a warning outside it: another domain, then the other seat.
            page.goto(f"{url}/?env=dnd-v0&opponent={champion}")
            page.wait_for_selector("#opponent-warning:not([hidden])")
            assert "was trained on craigslist-v0 as buyer" in page.inner_text("#opponent-info")
            assert "Outside its training" in page.inner_text("#opponent-warning")
            page.goto(f"{url}/?env=craigslist-v0&seat=buyer&opponent={champion}")
            page.wait_for_selector("#opponent-warning:not([hidden])")
            assert "trained as buyer, here it plays seller" in page.inner_text("#opponent-warning")
            page.select_option("#seat", "seller")  # the model now plays the buyer it was trained as
            assert page.is_hidden("#opponent-warning") and page.inner_text("#error") == ""
            page.click("#start")  # the game's own warning is empty; the engine is not there, so it fails
            page.wait_for_selector("#game:not([hidden])")
            assert page.is_hidden("#game-warning")
            page.goto(f"{url}/?env=dnd-v0&opponent={champion}")
            page.wait_for_selector("#opponent-warning:not([hidden])")
            page.click("#start")
            page.wait_for_selector("#game-warning:not([hidden])")
            assert "outside its training" in page.inner_text("#game-warning")
            assert page.script_errors == []
        finally:
            page.close()


def test_a_version_documented_before_the_seat_tag_has_its_seat_in_its_model_card(documented_registry) -> None:
    from models.play import TrainedFor, trained_for

    name = "socialrl-craigslist-specialist"
    assert trained_for(documented_registry.get_version(name, 1)) == TrainedFor(("craigslist-v0",), "buyer")
    documented_registry.client.delete_model_version_tag(name, "1", "socialrl.seat")
    older = documented_registry.get_version(name, 1)
    assert "socialrl.seat" not in older.tags and trained_for(older) == TrainedFor(("craigslist-v0",), "buyer")
    documented_registry.client.set_model_version_tag(name, "1", "socialrl.domains", "craigslist-v0,dnd-v0")
    stage2 = trained_for(documented_registry.get_version(name, 1))
    assert stage2.domains == ("craigslist-v0", "dnd-v0") and stage2.warning("m", "casino-v0", ["a"]).endswith(
        "outside its training."
    )


# --------------------------------------------------------------------- forfeited turns and a slow start
class Refuser(Stumbler):
    """A test opponent none of whose replies is ever accepted (an offer without a price)."""

    async def act(self, request) -> Action:
        return Action(self.agent_id, RAW_TEXT, "OFFER $")


class SlowRefusers(StumblingOpponents):
    """`refuser` in Craigslist: takes a second and a half to get ready (as a model engine takes half a minute),
    and says so until it is."""

    def __init__(self) -> None:
        self.ready = False

    def handles(self, name: str) -> bool:
        return name == "refuser"

    def options(self, env_id: str) -> list[OpponentOption]:
        return [OpponentOption("refuser", "refuser (test)", "code")] if env_id == "craigslist-v0" else []

    def preparing(self, name: str) -> str:
        return "" if self.ready else "Starting the refuser (this takes about two seconds)"

    async def make_agents(self, env_id: str, name: str, seats, seed: int) -> dict:
        await asyncio.sleep(1.5)
        self.ready = True
        return {seat: Refuser() for seat in seats}


def test_a_slow_start_and_forfeited_turns_say_so(browser, tmp_path: Path) -> None:
    store = TableStore(tmp_path / "tables")
    app = create_app([SlowRefusers()], record=lambda result: record_played_episode(store, result, "play-test"))
    with serve(app) as url:
        page = new_page(browser)
        try:
            page.goto(f"{url}/?env=craigslist-v0&seat=buyer&opponent=refuser&seed=4")
            page.wait_for_selector("#env option", state="attached")
            page.click("#start")
            # While the opponent starts, the status line says what it waits for and counts the seconds.
            status = page.wait_for_function(
                "() => { const t = document.getElementById('status').textContent; return t.startsWith('Start') && t; }"
            ).json_value()
            assert re.fullmatch(r"Starting the refuser \(this takes about two seconds\)\.\.\. \d+ s", status), status
            page.wait_for_selector("#log li.ready")
            assert re.fullmatch(r"opponent\s+refuser is ready \(after [12] s\)\.", page.inner_text("#log li.ready"))
            # The seller's three refused replies forfeit its turn; the person's three refused moves forfeit theirs.
            outcome = play_in_page(page, ["Hello. OFFER $50", "ACCEPT", "ACCEPT", "ACCEPT", "QUIT"])
            assert "Agreement: no" in outcome
            log = page.inner_text("#log")
            forfeits = page.locator("#log li.forfeit")
            assert [forfeits.nth(k).inner_text().split("\n")[-1] for k in range(forfeits.count())] == [
                "seller forfeits this turn: 3 replies in a row were refused.",
                "You forfeit this turn: 3 replies in a row were refused.",
                "seller forfeits this turn: 3 replies in a row were refused.",
            ]
            # Each where it happened: after the refusal that used up the retries (the person's own after the
            # invalid-action notice of its third refused move).
            assert log.index("seller forfeits") > log.index("seller's reply was refused")
            assert log.index("You forfeit") > log.rindex("Invalid action")
            # After the game: the refusals that forfeited a turn are marked in the table of attempts.
            record = page.locator("#record tbody tr")
            rows = [record.nth(k).inner_text() for k in range(record.count())]
            assert [k for k, row in enumerate(rows) if "(the turn is forfeited)" in row] == [3, 6, 9]
            assert page.script_errors == []
        finally:
            page.close()


def test_the_page_hears_what_a_model_waits_for(documented_registry) -> None:
    """`ModelOpponents.preparing`: the engine starting (the first model game), then nothing."""
    started, release = threading.Event(), threading.Event()

    class Client:
        def load_adapter(self, name: str, path) -> None:
            pass

    def serving() -> ModelServing:
        started.set()
        assert release.wait(30)
        return ModelServing(Client(), "http://127.0.0.1:9/v1")

    champion = "models:/socialrl-craigslist-specialist@champion"
    models = ModelOpponents(documented_registry, serving, start_time="about a second")
    assert (
        models.preparing(champion)
        == models.preparing("base")
        == "Starting the model engine (this takes about a second)"
    )
    worker = threading.Thread(target=models.served_name, args=(champion,))
    worker.start()
    try:
        assert started.wait(30)
        assert models.preparing(champion).startswith("Starting the model engine")
    finally:
        release.set()
        worker.join(60)
    assert models.preparing(champion) == models.preparing("base") == ""
    assert models.preparing("models:/socialrl-craigslist-specialist/1") == (
        "Loading models:/socialrl-craigslist-specialist/1 into the engine"
    )


def test_a_model_plays_the_seat_it_was_trained_for_unless_the_person_picks_one(documented_registry, browser) -> None:
    champion = "models:/socialrl-craigslist-specialist@champion"
    models = ModelOpponents(documented_registry, no_engine)
    assert models.trained_seat("craigslist-v0", champion) == "buyer" and models.trained_seat("dnd-v0", "base") == ""
    app = create_app([CodeOpponents(), models])
    with serve(app) as url:
        envs = {e["env_id"]: e for e in httpx.get(f"{url}/api/environments").json()}
        craigslist = envs["craigslist-v0"]
        assert craigslist["opponent_seats"] == {"buyer": ["seller"], "seller": ["buyer"]}
        defaults = {o["name"]: o["default_seat"] for o in craigslist["opponents"]}
        assert defaults[champion] == "seller" and defaults["boulware"] == "buyer"
        # Red-Black: the opponent plays the other team; a model trained as B1 faces a person in team A.
        red_black = envs["red-black-v0"]
        assert red_black["opponent_seats"]["A0"] == [s for s in red_black["seats"] if s.startswith("B")]
        assert default_seat("red-black-v0", red_black["seats"], "B1") == "A0"
        assert default_seat("red-black-v0", red_black["seats"], "A1") == "B0"
        assert default_seat("dnd-v0", envs["dnd-v0"]["seats"], "buyer") == envs["dnd-v0"]["seats"][0]
        # The server seats the person the same way when the request names no seat.
        game = httpx.post(f"{url}/api/games", json={"env_id": "craigslist-v0", "opponent": champion}).json()
        assert game["seat"] == "seller" and game["warning"] == ""
        code = httpx.post(f"{url}/api/games", json={"env_id": "craigslist-v0", "opponent": "boulware"}).json()
        assert code["seat"] == "buyer"
        page = new_page(browser)

        def seat_labels() -> list[str]:
            return page.eval_on_selector_all("#seat option", "options => options.map((o) => o.textContent)")

        try:
            page.goto(f"{url}/?env=craigslist-v0&opponent={champion}")
            page.wait_for_selector("#env option", state="attached")
            assert page.input_value("#seat") == "seller" and page.is_hidden("#opponent-warning")
            # The seat that would put the model outside its training is marked, as the environment is.
            assert seat_labels() == ["buyer - the model plays seller, outside its training", "seller"]
            page.select_option("#opponent", "boulware")  # a code agent plays every seat: the first, unmarked
            assert page.input_value("#seat") == "buyer" and seat_labels() == ["buyer", "seller"]
            page.select_option("#opponent", champion)
            assert page.input_value("#seat") == "seller"
            # Once the person picks a seat, choosing an opponent no longer moves it.
            page.select_option("#seat", "buyer")
            assert "trained as buyer, here it plays seller" in page.inner_text("#opponent-warning")
            page.select_option("#opponent", "boulware")
            page.select_option("#opponent", champion)
            assert page.input_value("#seat") == "buyer" and page.is_visible("#opponent-warning")
            # A typed model URI picks the seat too (a new environment forgets the chosen seat).
            page.select_option("#env", "dnd-v0")
            page.select_option("#env", "craigslist-v0")
            page.fill("#opponent-uri", champion)
            assert page.input_value("#seat") == "seller" and page.is_hidden("#opponent-warning")
            # Outside its training domain the environment is what the warning names; no seat is marked.
            page.goto(f"{url}/?env=dnd-v0&opponent={champion}")
            page.wait_for_selector("#opponent-warning:not([hidden])")
            assert not any("outside its training" in label for label in seat_labels())
            assert page.script_errors == []
        finally:
            page.close()
