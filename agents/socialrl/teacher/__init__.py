"""The strategic code teacher: a belief-based negotiator for the six SocialRL domains that writes
INFER -> ACT -> ANTICIPATE traces (the default source of SFT traces). See docs/teacher.md.

    from agents.socialrl.teacher import TEACHER_NAME, make_teacher
    agent = make_teacher(seed=0)   # an environments.core.runtime.Agent; agent.trace after an episode
"""

from agents.socialrl.teacher.agent import SUPPORTED_ENV_IDS, TEACHER_NAME, StrategicTeacher, make_teacher

__all__ = ["SUPPORTED_ENV_IDS", "TEACHER_NAME", "StrategicTeacher", "make_teacher"]
