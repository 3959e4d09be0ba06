"""Run configuration of the teacher, ToM, behaviour, leaderboard and YOAO assets (Dagster `Config` classes).

API keys are plain string fields meant to be given as `EnvVar("NAME")` in the run config (YAML:
`api_key: {env: NAME}`): Dagster resolves the variable in the run worker and stores only its name in
the run's configuration, so the key appears in no log, no UI page and no metadata.
"""

from dagster import Config
from pydantic import Field

from models.cli.leaderboard import Endpoint
from models.socialrl.teachers import TeacherConfig
from models.yoao.config import Endpoint as TeacherEndpoint


class TeacherSourceConfig(Config):
    """Where `teacher_traces` gets its teacher (models/socialrl/teachers.py)."""

    source: str = Field(default="code", description="code (the embedded strategic teacher), local or endpoint.")
    model: str = Field(default="", description="local: a model reference; endpoint: the model name.")
    base_url: str = Field(default="", description="endpoint: the OpenAI base URL.")
    api_key: str = Field(default="", description="endpoint: the API key; pass an EnvVar, never the value.")
    tom: bool = Field(default=True, description="LLM teachers: prompt with the INFER -> ACT -> ANTICIPATE scaffold.")
    temperature: float = Field(default=0.7, description="LLM teachers: sampling temperature.")
    max_tokens: int = Field(default=256, description="LLM teachers: most tokens per reply.")
    request_retries: int = Field(default=3, description="LLM teachers: retries on timeouts, 429 and 5xx.")
    request_timeout_s: float = Field(default=60.0, description="LLM teachers: seconds per call.")
    concurrency: int = Field(default=8, description="Episodes in flight at once.")

    def teacher(self) -> TeacherConfig:
        return TeacherConfig(
            source=self.source,
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key,
            tom=self.tom,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            request_retries=self.request_retries,
            request_timeout_s=self.request_timeout_s,
            concurrency=self.concurrency,
        )


class EndpointConfig(Config):
    """An OpenAI-compatible model: a leaderboard entry (a remote endpoint, or a model the `engine` resource serves)
    or a YOAO teacher candidate (a remote endpoint, or `engine`)."""

    name: str = Field(description="The row's label.")
    model: str = Field(
        description="Remote: the model name. Local (leaderboard): `base`, a checkpoint or adapter directory, or "
        "models:/name@alias."
    )
    base_url: str = Field(
        default="",
        description="OpenAI base URL. Leaderboard: empty = the engine resource serves `model`. YOAO: required "
        "(`engine` = the run's own engine).",
    )
    api_key: str = Field(default="", description="Leaderboard: the API key; pass an EnvVar, never the value.")
    api_key_env: str = Field(
        default="", description="YOAO: the environment variable holding the key, read when the candidate plays."
    )

    def endpoint(self) -> Endpoint:
        """The leaderboard entry."""
        if self.api_key_env:
            raise ValueError(f"endpoint {self.name}: a leaderboard entry takes its key as api_key (an EnvVar)")
        return Endpoint(self.name, self.model, self.base_url, api_key=self.api_key)

    def teacher_endpoint(self) -> TeacherEndpoint:
        """The YOAO teacher candidate."""
        if self.api_key:
            raise ValueError(f"endpoint {self.name}: a YOAO teacher candidate names its key's variable in api_key_env")
        return TeacherEndpoint(self.name, self.base_url, self.model, self.api_key_env or None)


class LeaderboardConfig(Config):
    """Which endpoints `endpoint_leaderboard` evaluates."""

    endpoints: list[EndpointConfig] = Field(
        default_factory=lambda: [EndpointConfig(name="base", model="base")],
        description="Endpoints to evaluate (default: the engine's base model).",
    )
    include_champions: bool = Field(
        default=True, description="Also every registered `socialrl-*` champion, served by the engine."
    )
    seed: int = Field(default=0, description="Seeds the held-out draw and the sampling (same seed = paired rows).")


class RedTeamConfig(Config):
    """Which policies `privacy_red_team` attacks, and with which extractor."""

    policies: dict[str, str] = Field(
        default_factory=lambda: {
            "base": "base",
            "sft": "sft_warmstart",
            "specialist": "models:/socialrl-{domain}-specialist@champion",
        },
        description="Label -> model: `base`, `sft_warmstart` (that domain's latest warm-start), a directory or a "
        "models:/ URI ({domain} is replaced by marketplace / calendar). Missing ones are skipped.",
    )
    extractor_base_url: str = Field(default="", description="Empty: the code extractor; else an LLM extractor here.")
    extractor_model: str = Field(default="", description="The LLM extractor's model name.")
    extractor_api_key: str = Field(default="", description="The LLM extractor's API key; pass an EnvVar.")
    seed: int = Field(default=0, description="Seeds the scenarios and the sampling.")
