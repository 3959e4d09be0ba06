"""The page of `make play` (agents/web_play.py): plain HTML, CSS and JavaScript, no build step.

Every text from the server is put into the page with `textContent` (never `innerHTML`), so a move or a
model reply containing markup is shown, not run. The page asks /api/games/<id>?since=<n> twice a second
for what happened since; query parameters `env`, `seat`, `opponent`, `seed` preselect the form (links
from the README or a notebook can open a given match). An unknown `env` or `seat` in the address is refused
with a message (the form does not start until one is chosen), not silently replaced. Beside the opponent the
page says what a model was trained for and warns when the chosen environment or seat is outside it; choosing a
model moves the seat to the one that leaves the model its trained seat (the opponent's `default_seat`) until
the person picks a seat, and the seat list marks each seat that would put the model outside its training.
While the opponent starts, the status line says what it waits for and counts the seconds.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>socialrl: play</title>
<link rel="icon" href="data:,">
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 56rem; padding: 1rem; color: #222; }
  h1 { font-size: 1.35rem; margin: .5rem 0 1rem; }
  fieldset { border: 1px solid #ccc; border-radius: 6px; display: flex; flex-wrap: wrap; gap: .75rem 1.25rem; }
  label { display: flex; flex-direction: column; font-size: .85rem; color: #444; }
  select, input, textarea, button { font: inherit; }
  select { max-width: 26rem; }
  button { padding: .35rem .9rem; cursor: pointer; }
  #error { color: #a00; margin: .75rem 0; min-height: 1.2em; white-space: pre-wrap; }
  #intro { background: #f6f6f6; border-radius: 6px; padding: .5rem .75rem; white-space: pre-wrap; }
  #log { list-style: none; padding: 0; }
  #log li { margin: .35rem 0; padding: .4rem .6rem; border-left: 4px solid #bbb; white-space: pre-wrap;
            overflow-wrap: anywhere; background: #fafafa; }
  #log li.private { border-left-color: #c77d00; background: #fff8ec; }
  #log li.you { border-left-color: #2a6fdb; background: #f2f6fd; }
  #log li.turn { border-left-color: #2a9d4b; color: #185c2e; background: #f1faf3; }
  #log li.invalid_action, #log li.timeout, #log li.refused { border-left-color: #c00; background: #fff0f0; }
  #log li.forfeit { border-left-color: #c00; background: #ffe4e4; font-weight: 600; }
  #log li.ready { border-left-color: #2a9d4b; color: #185c2e; font-size: .9rem; }
  #log li.parsed { border-left-color: #2a6fdb; color: #33557f; font-size: .9rem; background: #f8faff; }
  #log li.deal, #log li.episode_end { border-left-color: #333; font-weight: 600; }
  .who { font-size: .8rem; color: #666; display: block; }
  #status { font-weight: 600; margin: .75rem 0; }
  #move { width: 100%; min-height: 4.5rem; box-sizing: border-box; }
  #opponent-info { color: #444; margin: .25rem 0; }
  #opponent-warning, #game-warning { color: #8a4b00; background: #fff6e5; border-radius: 4px; padding: .25rem .5rem; }
  #outcome { border: 2px solid #333; border-radius: 6px; padding: .5rem .75rem; white-space: pre-wrap; }
  #record { border-collapse: collapse; margin: 1rem 0; font-size: .9rem; width: 100%; }
  #record th, #record td { border: 1px solid #ccc; padding: .25rem .4rem; text-align: left; vertical-align: top;
                           white-space: pre-wrap; overflow-wrap: anywhere; }
  #record tr.refused td { background: #fff0f0; }
</style>
</head>
<body>
<h1>socialrl: play a negotiation in your browser</h1>
<form id="setup">
  <fieldset>
    <label>Environment <select id="env" name="env"></select></label>
    <label>Your seat <select id="seat" name="seat"></select></label>
    <label>Opponent <select id="opponent" name="opponent"></select></label>
    <label>or a registered model <input id="opponent-uri" name="opponent-uri" placeholder="models:/name@alias" size="28"></label>
    <label>Seed <input id="seed" name="seed" type="number" min="0" value="0" size="6"></label>
    <label>&nbsp;<button id="start" type="submit">Start</button></label>
  </fieldset>
</form>
<p id="env-title"></p>
<p id="opponent-info"></p>
<p id="opponent-warning" role="status" hidden></p>
<div id="error" role="alert"></div>
<section id="game" hidden>
  <p id="game-warning" hidden></p>
  <div id="intro"></div>
  <ol id="log" aria-live="polite"></ol>
  <div id="status"></div>
  <form id="move-form">
    <textarea id="move" name="move" placeholder="Your move, e.g. one of the examples above" disabled></textarea>
    <button id="send" type="submit" disabled>Send</button>
    <span id="allowed"></span>
  </form>
  <div id="outcome" hidden></div>
  <table id="record" hidden>
    <caption>Every attempt of every seat, as the game read it (the texts of refused replies included)</caption>
    <thead><tr><th>#</th><th>seat</th><th>text</th><th>read as</th><th>refused because</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let environments = [];
let game = null;
let next = 0;
let polling = null;
let epoch = 0;  // bumped by each move and by its answer: an answer to a poll sent before either is stale
let sending = false;  // a move is in flight: no answer enables the box until the server has it
let introShown = false;
let seatChosen = false;  // the person (or the page address) chose the seat: choosing a model no longer moves it

function showError(message) { $("error").textContent = message || ""; }

async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: body ? {"Content-Type": "application/json"} : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    let message = (data && (data.error || data.detail)) || response.statusText;
    if (typeof message !== "string") message = JSON.stringify(message);
    throw new Error(message);
  }
  return data;
}

function option(select, value, label) {
  const o = document.createElement("option");
  o.value = value; o.textContent = label;
  select.appendChild(o);
}

function fillEnvironment(envId, seat, opponent) {
  const env = environments.find((e) => e.env_id === envId) || environments[0];
  $("env").value = env.env_id;
  $("env-title").textContent = env.title;
  $("seat").replaceChildren();
  env.seats.forEach((s) => option($("seat"), s, s));
  seatChosen = Boolean(seat && env.seats.includes(seat));
  if (seatChosen) $("seat").value = seat;
  $("opponent").replaceChildren();
  env.opponents.forEach((o) => option($("opponent"), o.name, o.label));
  if (opponent) {
    if (env.opponents.some((o) => o.name === opponent)) $("opponent").value = opponent;
    else $("opponent-uri").value = opponent;
  }
  describeOpponent();
}

function refuse(message) {
  // A choice in the page address that does not exist: say so, and start nothing until one is chosen.
  showError(message);
  $("start").disabled = true;
}

function chosen() { showError(""); $("start").disabled = false; describeOpponent(); }

function seatChanged() { seatChosen = true; chosen(); }

function opponentChanged() {
  // A model sits where it was trained (its default seat) unless the person chose a seat.
  const env = environments.find((e) => e.env_id === $("env").value);
  const o = env ? env.opponents.find((x) => x.name === ($("opponent-uri").value.trim() || $("opponent").value)) : null;
  if (env && !seatChosen) $("seat").value = o && o.default_seat ? o.default_seat : env.seats[0];
  describeOpponent();
}

function seatOutside(env, o, seat) {
  // The seats the model would play when the person takes `seat`, if that is not the seat it was trained for.
  const plays = env.opponent_seats[seat] || [];
  if (!o || !o.seat || (o.domains.length && !o.domains.includes(env.env_id))) return null;
  return plays.length && !plays.includes(o.seat) ? plays : null;
}

function describeOpponent() {
  // What the chosen model was trained for, and a warning when this environment or seat is outside it; each
  // seat that would put the model outside its training is marked in the seat list.
  const env = environments.find((e) => e.env_id === $("env").value);
  const name = $("opponent-uri").value.trim() || $("opponent").value;
  const o = env ? env.opponents.find((x) => x.name === name) : null;
  const warning = $("opponent-warning");
  warning.hidden = true;
  $("opponent-info").textContent = o && o.trained ? name + " was trained on " + o.trained + "." : "";
  if (env) {
    Array.from($("seat").options).forEach((opt) => {
      const plays = seatOutside(env, o, opt.value);
      opt.textContent = opt.value + (plays ? " - the model plays " + plays.join(", ") + ", outside its training" : "");
    });
  }
  if (!o || !o.trained) return;
  let text = "";
  const plays = seatOutside(env, o, $("seat").value);
  if (o.domains.length && !o.domains.includes(env.env_id)) {
    text = "Outside its training: " + name + " was trained on " + o.trained + ", here it plays " + env.env_id + ".";
  } else if (plays) {
    text = "Outside its training: " + name + " was trained as " + o.seat + ", here it plays " + plays.join(", ") + ".";
  }
  warning.textContent = text;
  warning.hidden = !text;
}

async function load() {
  try {
    environments = await api("GET", "/api/environments");
  } catch (e) { showError("Cannot load the environments: " + e.message); return; }
  environments.forEach((e) => option($("env"), e.env_id, e.env_id));
  const params = new URLSearchParams(location.search);
  if (params.has("seed")) $("seed").value = params.get("seed");
  const envId = params.get("env"), seat = params.get("seat");
  fillEnvironment(envId, seat, params.get("opponent"));
  opponentChanged();  // no seat in the address: the opponent's default seat
  if (envId && !environments.some((e) => e.env_id === envId)) {
    refuse("Unknown environment '" + envId + "' in the page address; choose one of " +
           environments.map((e) => e.env_id).join(", ") + ".");
  } else if (seat && seat !== $("seat").value) {
    const env = environments.find((e) => e.env_id === $("env").value);
    refuse("Unknown seat '" + seat + "' in " + env.env_id + " (page address); choose one of " + env.seats.join(", ") + ".");
  }
  $("env").addEventListener("change", () => { fillEnvironment($("env").value); opponentChanged(); chosen(); });
  $("seat").addEventListener("change", seatChanged);
  $("opponent").addEventListener("change", opponentChanged);
  $("opponent-uri").addEventListener("input", opponentChanged);
}

function addEvent(event) {
  const li = document.createElement("li");
  li.className = event.private ? "private" : event.kind;
  const who = document.createElement("span");
  who.className = "who";
  if (event.kind === "you") who.textContent = "you";
  else if (event.kind === "parsed") who.textContent = "how the game read your move";
  else if (event.kind === "refused") who.textContent = event.sender + ": refused reply";
  else if (event.kind === "forfeit") who.textContent = "forfeited turn";
  else if (event.kind === "ready") who.textContent = "opponent";
  else if (event.kind === "observation") who.textContent = event.sender ? event.sender : (event.private ? "private to you" : "game");
  else who.textContent = event.kind.replace("_", " ");
  const text = document.createElement("span");
  text.className = "text";
  text.textContent = event.text;
  li.append(who, text);
  $("log").appendChild(li);
}

function showIntro(state) {
  // The rules arrive once the seat is set up (after the opponent is ready); shown once per game.
  if (introShown || !state.grammar) return;
  introShown = true;
  const lines = ["You play '" + state.seat + "' in " + state.env_id + " against " + state.opponent + ".", ""];
  lines.push("Moves: " + Object.entries(state.kinds).map(([k, v]) => k + " (" + v + ")").join("; "));
  lines.push("", state.grammar);
  if (state.examples.length) {
    lines.push("", "Examples:");
    state.examples.forEach((e) => lines.push("  - " + e.split("\n").join("\n    ")));
  }
  $("intro").textContent = lines.join("\n");
}

function render(state) {
  showIntro(state);
  // Two answers can overlap (the timer and a move's own refresh): append only what is not shown yet.
  if (state.since <= next) state.events.slice(next - state.since).forEach(addEvent);
  next = Math.max(next, state.next);
  if (state.events.length) window.scrollTo(0, document.body.scrollHeight);
  const mine = state.your_turn && !state.done && !sending;
  $("move").disabled = !mine; $("send").disabled = !mine;
  $("allowed").textContent = mine ? "allowed: " + state.allowed.join(", ") : "";
  if (state.status === "starting") {
    // What the opponent still waits for (e.g. the model engine starting), and for how long so far.
    $("status").textContent = (state.preparing || "Preparing the opponent") + "... " + Math.round(state.elapsed_s) + " s";
  }
  else if (mine) $("status").textContent = state.turn_text || "Your turn.";
  else if (!state.done) $("status").textContent = "Waiting for the opponent...";
  else $("status").textContent = "Game over (" + state.status + ").";
  if (state.error) showError(state.error);
  if (state.done) {
    clearInterval(polling); polling = null;
    const o = state.outcome;
    const box = $("outcome");
    box.hidden = false;
    if (o) {
      const lines = [
        "Agreement: " + (o.agreement ? "yes" : "no"),
        "Deal: " + (o.deal ? JSON.stringify(o.deal) : "none"),
        "Your reward: " + (o.reward === null ? "n/a" : o.reward.toFixed(3)),
        "Invalid moves: " + o.invalid_actions,
        "Private facts you revealed: " + (o.leaked.length ? o.leaked.join(", ") : "none"),
        "Recorded as episode " + state.episode_id + (o.recorded ? "" : " (not recorded)"),
      ];
      box.textContent = lines.join("\n");
    } else { box.textContent = "No outcome (" + state.status + ")."; }
    showRecord(state.record || []);
  }
}

function showRecord(record) {
  const body = $("record").querySelector("tbody");
  body.replaceChildren();
  record.forEach((a) => {
    const row = document.createElement("tr");
    row.className = a.accepted ? "accepted" : "refused";
    const why = a.accepted ? "" : a.reason + (a.forfeit ? " (the turn is forfeited)" : "");
    [String(a.index + 1), a.seat, a.text, a.read_as, why].forEach((value) => {
      const cell = document.createElement("td");
      cell.textContent = value;
      row.appendChild(cell);
    });
    body.appendChild(row);
  });
  $("record").hidden = record.length === 0;
}

async function poll() {
  if (!game) return;
  const asked = game, sent = epoch;
  try {
    const state = await api("GET", "/api/games/" + game + "?since=" + next);
    if (asked === game && sent === epoch) render(state);  // a new game or a move may have come meanwhile
  } catch (e) { showError(e.message); clearInterval(polling); polling = null; }
}

$("setup").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  showError("");
  const uri = $("opponent-uri").value.trim();
  const body = {
    env_id: $("env").value, seat: $("seat").value, opponent: uri || $("opponent").value,
    seed: parseInt($("seed").value || "0", 10),
  };
  let state;
  try { state = await api("POST", "/api/games", body); }
  catch (e) { showError(e.message); return; }
  if (polling) clearInterval(polling);
  game = state.game_id; next = 0; introShown = false;
  $("game-warning").textContent = state.warning || "";
  $("game-warning").hidden = !state.warning;
  $("log").replaceChildren(); $("outcome").hidden = true; $("record").hidden = true; $("game").hidden = false;
  $("intro").textContent = "You play '" + state.seat + "' in " + state.env_id + " against " + state.opponent + ".";
  render(state);
  polling = setInterval(poll, 500);
});

$("move-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = $("move").value;
  showError("");
  epoch++;
  sending = true;
  $("move").disabled = true; $("send").disabled = true;  // until the answer to this move says whose turn it is
  try {
    await api("POST", "/api/games/" + game + "/moves", {text});
    $("move").value = "";
  } catch (e) { showError(e.message); }
  // A timer poll sent while the move was in flight may be answered from the state before it (your turn) and
  // would enable the box for a moment: only polls sent after the move's answer count.
  sending = false;
  epoch++;
  await poll();
});

$("move").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("send").click(); }
});

load();
</script>
</body>
</html>
"""
