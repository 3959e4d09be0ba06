"""Model cards: what a registered version is, for people (the version description and the README.md beside
the adapter)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.display import interval_text


def _is_path_like(reference: str) -> bool:
    return reference.startswith(("/", "~", "./", "../", "file:")) or (len(reference) > 2 and reference[1:3] == ":\\")


@dataclass(frozen=True)
class ModelCard:
    """What a registered version is, for people: the version description and the README.md beside the
    adapter. The caller gives every value (what it trained on, how it compares with its parent)."""

    name: str
    """Registered model name, e.g. socialrl-craigslist-specialist."""
    base_model: str
    """The base model by name (a profile's model reference such as smollm2-135m-instruct, or a hub id such
    as Qwen/Qwen3-4B-Instruct-2507), never a path of the machine that trained it."""
    domain: str
    """What it plays, e.g. craigslist-v0 (or "all" for a unified policy)."""
    profile: str
    """The profile it was trained with (smoke, cpu, paper)."""
    training: str
    """How it was trained, e.g. "PPO, 2 iterations x 4 episodes, from the SFT warm-start"."""
    training_data: str
    """What it was trained on, e.g. "28 teacher traces (reward >= 0.3) of 64 training scenarios, seed 0"."""
    evaluation: Mapping[str, float] = field(default_factory=dict)
    """This version's held-out evaluation (mean_reward, ci_low, ci_high, n, agreement_rate, ...)."""
    evaluation_suite: str = ""
    """Where that evaluation comes from, e.g. "heldout(n=32, seed=0), seat buyer, vs boulware, conceder, reciprocal"."""
    parent: str = ""
    """What it started from / is compared with, e.g. "SFT warm-start" or "socialrl-craigslist-specialist v2"."""
    versus_parent: Mapping[str, Any] | None = None
    """Paired difference this - parent on the same episodes: {"mean", "ci_low", "ci_high", "n"}
    (`Estimate.as_dict()` of models.evaluation.stats)."""
    seat: str = ""
    """The seat it plays in its domain."""
    git_commit: str = ""
    run_id: str = ""
    """The MLflow training run."""
    dagster_run_id: str = ""
    version: int | None = None
    """The registry version (filled in by `Tracker.document_version`)."""
    notes: str = ""
    """Anything else a reader should know (limits, caveats)."""
    usage: str = ""
    """How to load it, for an adapter that is not a registered model (default: serve it on the base model or
    resolve `models:/<name>@champion`)."""

    def __post_init__(self) -> None:
        for name in ("name", "base_model", "domain", "profile", "training", "training_data"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"model card: {name} must be a non-empty text")
        if _is_path_like(self.base_model):
            raise ValueError(
                f"model card: base_model {self.base_model!r} is a path; give the model by name "
                "(the profile's base_model, e.g. smollm2-135m-instruct, or a hub id)"
            )

    def _versus_parent_text(self) -> str:
        if not self.versus_parent or not self.parent:
            return ""
        v = self.versus_parent
        mean, low, high = v.get("mean"), v.get("ci_low"), v.get("ci_high")
        if mean is None or not math.isfinite(float(mean)):
            return f"vs {self.parent}: no paired difference (undefined)"
        interval = "" if low is None or high is None else f" [{float(low):+.3f}, {float(high):+.3f}]"
        return f"vs {self.parent}: {float(mean):+.3f}{interval} mean reward difference, n={v.get('n', '?')} paired episodes"

    def _evaluation_text(self) -> str:
        e = self.evaluation
        if "mean_reward" not in e:
            return ""
        low, high = e.get("ci_low"), e.get("ci_high")
        text = "mean reward " + interval_text(
            float(e["mean_reward"]), None if low is None else float(low), None if high is None else float(high)
        )
        if "n" in e:
            text += f" (n={int(e['n'])})"
        return text + (f", {self.evaluation_suite}" if self.evaluation_suite else "")

    def description(self) -> str:
        """The registry version's description (MLflow renders it as markdown): what, from what, how good.
        The held-out result is a code span: MLflow's markdown renderer (showdown) reads "[0.31, 0.52] (n=12)"
        as a link whose text is the interval and whose target is "n=12", so the interval and n would vanish."""
        lines = [
            f"**{self.domain}** policy ({self.training}) on base model `{self.base_model}`, profile `{self.profile}`.",
            f"Trained on: {self.training_data}.",
        ]
        if evaluation := self._evaluation_text():
            lines.append(f"Held-out: `{evaluation.replace('`', chr(39))}`.")
        if versus := self._versus_parent_text():
            lines.append(f"Paired {versus}.")
        if self.notes:
            lines.append(self.notes)
        return "\n\n".join(lines)

    def readme(self) -> str:
        """The model card (README.md beside the adapter), with Hugging Face-style front matter."""
        title = self.name + (f" v{self.version}" if self.version is not None else "")
        front = [
            "---",
            f"base_model: {json.dumps(self.base_model)}",
            "library_name: peft",
            "tags:",
            "- socialrl",
            f"- {json.dumps(self.domain)}",
            f"- {json.dumps('profile-' + self.profile)}",
            "---",
        ]
        rows = [("Registered model", title), ("Base model", f"`{self.base_model}`"), ("Domain", self.domain)]
        rows += [("Seat", self.seat)] if self.seat else []
        rows += [("Profile", self.profile), ("Training", self.training), ("Training data", self.training_data)]
        rows += [("Parent", self.parent)] if self.parent else []
        rows += [("Git commit", f"`{self.git_commit}`")] if self.git_commit else []
        rows += [("MLflow run", f"`{self.run_id}`")] if self.run_id else []
        rows += [("Dagster run", f"`{self.dagster_run_id}`")] if self.dagster_run_id else []
        body = [*front, "", f"# {title}", "", "| | |", "| --- | --- |"]
        body += [f"| {k} | {str(v).replace('|', '/')} |" for k, v in rows]
        body += ["", "## Evaluation", ""]
        if self.evaluation:
            body += [f"Suite: {self.evaluation_suite or 'not stated'}", "", "| metric | value |", "| --- | --- |"]
            body += [
                f"| {k} | {float(v):.4g} |"
                if isinstance(v, int | float) and math.isfinite(float(v))
                else f"| {k} | n/a |"
                for k, v in self.evaluation.items()
            ]
        else:
            body.append("Not evaluated when this card was written.")
        if versus := self._versus_parent_text():
            body += [
                "",
                f"Paired comparison {versus} (same scenarios, seats and seeds; scenario-clustered bootstrap 95% CI).",
            ]
        body += [
            "",
            "## How to use",
            "",
            self.usage
            or (
                f"Serve it on `{self.base_model}` with vLLM's runtime LoRA loading, or resolve "
                f"`models:/{self.name}@champion` with `models.serving.model_store.resolve_model`."
            ),
        ]
        if self.notes:
            body += ["", "## Notes", "", self.notes]
        return "\n".join(body) + "\n"


def write_model_card(adapter_dir: str | Path, card: ModelCard) -> Path:
    """Write `card` as README.md in the adapter directory (replacing PEFT's empty template) and name the
    base model in adapter_config.json by `card.base_model` instead of the training machine's path (vLLM and
    PEFT load an adapter onto whatever base they are given; they do not read that field). Returns the
    README path."""
    directory = Path(adapter_dir)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory}: not an adapter directory")
    config_path = directory / "adapter_config.json"
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text())
        except ValueError as exc:
            raise ValueError(f"{config_path}: not valid JSON ({exc})") from exc
        if isinstance(config, dict) and "base_model_name_or_path" in config:
            config["base_model_name_or_path"] = card.base_model
            config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    readme = directory / "README.md"
    readme.write_text(card.readme())
    return readme
