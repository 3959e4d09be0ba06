"""The human agent plays through the same event interface, from a real terminal process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_human_plays_craigslist_from_stdin() -> None:
    moves = "OFFER soon\nOFFER $99999\n"
    proc = subprocess.run(
        [sys.executable, "-m", "agents.play", "craigslist-v0", "--seat", "buyer", "--opponent", "conceder"],
        input=moves,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "you play 'buyer'" in out
    assert "Your private target price" in out  # the buyer's own private facts are shown
    assert "[invalid_action] Invalid action: `OFFER` needs a price" in out
    # Offering far above the listing: the seller accepts at once and the buyer's reward is 0.
    assert "Agreement: True; your reward 0.000" in out
