"""Tolerant, linear-time parsing helpers shared by the environments' action grammars.

Every grammar has the same shape: the model writes free text and ends with one command line such as
`OFFER $120`, `ACCEPT` or `PROPOSE book=1 hat=2 ball=0`. Capitalised commands count anywhere in the text,
lower-case ones only on a line of their own (`own_line`), so that prose such as "would you accept my
offer?" stays a message. The parser takes the *last* command found (models often restate earlier
offers), tolerates markdown emphasis, bullets, quotes, `$` and thousands separators, and returns the
remaining text as the message said along with the action.

What every grammar shares, so that text is read the same way everywhere:

* **Length cap.** `cap_reply` cuts a reply longer than the environment's cap (`MAX_REPLY_CHARS`, 8,000
  characters unless a module says otherwise) to its *last* characters before parsing: the command ends a
  reply, and a bounded input bounds the time a parse can take inside the event loop.
* **Linear time.** `find_last_command` matches on `normalise_text(text)`: markdown decoration removed and every
  run of whitespace collapsed to one character (a line break when the run holds one, else a space). A
  pattern's whitespace quantifiers can then only ever match one character, so adjacent or optional
  whitespace (`[ \\t]*:?[ \\t]*`) cannot backtrack over a long run; patterns start with a literal, a word
  boundary or a look-behind guard, so a search never re-scans a long run from every position. Together
  with the cap, a parse costs time linear in the reply's length (tests/test_grammar_hardening.py).
* **Negation** (`negated_before`): a command word (or a choice word) is not a command when the words right
  before it, in the same sentence, negate it: a negation cue (not, never, cannot, any "...n't", refuse,
  unable, unwilling, nor, neither), possibly followed by up to three filler words (to, be, going, really,
  ...). "I do NOT ACCEPT", "I refuse to ACCEPT" and "I can't  ACCEPT" / "I won't\\nACCEPT" (whitespace and
  line breaks do not separate) are not acceptances; "That is not bad. ACCEPT" is (a sentence boundary,
  one of `.!?;:`, ends the look-back). `find_last_command` skips negated matches and takes the last one
  left.
* **Numbers** (`read_number`): an optional sign, an optional currency symbol ($, EUR, GBP signs),
  digits with optional thousands separators (commas between groups of exactly three digits) and an
  optional decimal part. Exponents (`1e308`), `inf`/`nan`, k/m suffixes, a comma that does not separate
  groups of three (`1,50`) and more than 15 significant digits are rejected with a message saying why,
  as are values outside the caller's range.
* **A number is read whole or refused.** Grammars capture number tokens with `NUMBER` (or
  `number_token` for a list of numbers or a time), which takes the whole number-like run: digits of any
  script, separators between digits (`.,:/'_` and the typographic apostrophe), a sign or dash right after
  the digits (`5-`, `120-130`), `%`, superscripts and vulgar fractions, a letter between digits (`1e308`,
  `2x100`) and, for a lone number, a space between digits (`1 200`). The reader then reads the whole run
  or says why it cannot (`1 200`, `1'000`, `1/2`, `13:61`, `5-`), so no number is ever read up to the
  first character the reader does not expect with the rest dropped. A run stops at a letter that is not
  followed by a digit (`120USD`, `35/hour`, `2pm` keep their units) and at punctuation that is not
  followed by a digit (`$150.`, `$150, 2 items`).
* **Bounded messages.** A bad value is quoted with `show` (environments/core/quoting.py): at most a short
  prefix and the value's length, whatever its size.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from environments.core.quoting import show

MAX_REPLY_CHARS = 8_000
"""Default reply cap: longer replies are cut to their last MAX_REPLY_CHARS characters before parsing."""

_DECORATION = re.compile(r"[*_`>#]+")
_LINE_BREAKS = str.maketrans({c: "\n" for c in "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})
_HORIZONTAL_RUN = re.compile(r"[^\S\n]+")
_BREAK_RUN = re.compile(r" ?\n[\n ]*")

_ATTACHED = (
    r"\d",  # digits of any script (a non-ASCII one makes the token unreadable, not shorter)
    r"[.,:/'\u2019_]+(?=\d)",  # separators between digits: 1,000 1.5 13:61 1/2 1'000 1_000
    r"[%\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u209f\u2150-\u215f]",  # 50% 1² 1½
    r"[eE][-+\u2212](?=\d)",  # 1e-5
    r"[A-Za-z](?=\d)",  # a letter between digits: 1e308 2x100 14h00
)
_DASH = r"[-+\u2212\u2010-\u2015](?![A-Za-z])"  # right after digits: 5- 120-130 100+ (not 120-ish)
_SPACE = r"(?<=\d) (?=\d)"  # 1 200


@functools.lru_cache(maxsize=8)
def number_token(*, spaces: bool = True, dashes: bool = True) -> str:
    """A pattern for the whole number-like run that starts at a digit (or `.digit`): everything written
    right after the digits that a reader could take as part of the number (see the module docstring), so
    that the captured token is read whole or refused, never cut short. `spaces`: a space between two digits
    joins them (`1 200`: one lone number; off for a list of numbers such as counts `1 2 0`). `dashes`: a
    sign or dash right after digits belongs to the token (off for times, whose ranges `14:00-15:00` a
    grammar reads itself). The repetition is possessive: the run is never given back to match a shorter
    number, and matching it costs time linear in its length."""
    parts = list(_ATTACHED)
    if dashes:
        parts.append(_DASH)
    if spaces:
        parts.append(_SPACE)
    return rf"(?:\d|\.\d)(?:{'|'.join(parts)})*+"


NUMBER = rf"[-+\u2212]?[$\u20ac\u00a3]?[ ]?[-+\u2212]?{number_token()}(?:[kKmM](?![A-Za-z]))?"
"""A lone number-like token for grammars (capture it and read it with `read_number`): sign, currency and the
whole number-like run (`number_token`), with a k/m suffix when one is written, so that the reader can
reject what is not one plain number (`1e308`, `1.5k`, `1 200`, `1'000`, `1/2`, `13:61`, `120-130`)."""


def cap_reply(text: object, limit: int = MAX_REPLY_CHARS) -> str:
    """The reply as text, cut to its last `limit` characters when longer (non-text becomes "")."""
    if not isinstance(text, str):
        return ""
    return text[-limit:] if len(text) > limit else text


def clean(text: str) -> str:
    """Strip markdown decoration so `**OFFER:** $1,200` reads as `OFFER: $1,200`."""
    return _DECORATION.sub("", text or "")


def squeeze(text: str) -> str:
    """Collapse every run of whitespace to one character: a line break when the run holds one, else a
    space; no space at either end of a line. Linear in the length of the text."""
    text = (text or "").replace("\r\n", "\n").translate(_LINE_BREAKS)
    text = _HORIZONTAL_RUN.sub(" ", text)
    return _BREAK_RUN.sub("\n", text).strip(" \n")


def normalise_text(text: str) -> str:
    """What grammars match on: decoration removed, then whitespace squeezed."""
    return squeeze(clean(text))


def own_line(words: str) -> str:
    """A pattern for `words` in any case forming a whole line (optionally after `Action:`, before a full
    stop). Lower-case commands only count on a line of their own, so prose such as "I can't accept
    that" stays a message; capitalised commands (`ACCEPT`) count anywhere. Meant for normalised text
    (single spaces), where its optional spaces cannot backtrack over a run."""
    return rf"(?m:^(?:(?:action|command|decision) ?: ?)?(?:{words}) ?[.!]? ?$)"


# ------------------------------------------------------------------------------------------ negation
NEGATION_CUES = frozenset(
    [
        "not",
        "never",
        "cannot",
        "cant",
        "dont",
        "wont",
        "nor",
        "neither",
        "refuse",
        "refuses",
        "refused",
        "refusing",
        "unable",
        "unwilling",
    ]
)
"""Words that negate the command right after them (any word ending in n't does too)."""
FILLER_WORDS = frozenset(
    [
        "to",
        "be",
        "going",
        "gonna",
        "really",
        "possibly",
        "ever",
        "even",
        "just",
        "simply",
        "yet",
        "able",
        "willing",
        "ready",
        "prepared",
        "about",
        "want",
        "wanting",
        "quite",
        "so",
        "currently",
    ]
)
"""Words that may stand between a negation cue and the command ("not going to ACCEPT")."""
_MAX_FILLERS = 3
_LOOK_BACK = 80
_SENTENCE_END = ".!?;:"
_WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)*")


def negated_before(text: str, index: int, extra_fillers: Iterable[str] = ()) -> bool:
    """Whether the word(s) just before `text[index]` negate what starts there (the shared negation rule;
    see the module docstring). Looks back at most 80 characters, within the sentence."""
    prefix = text[max(0, index - _LOOK_BACK) : index]
    cut = max(prefix.rfind(c) for c in _SENTENCE_END)
    words = _WORD.findall(prefix[cut + 1 :])
    fillers = FILLER_WORDS.union(w.lower() for w in extra_fillers)
    skipped = 0
    for word in reversed(words):
        w = word.lower().replace("\u2019", "'")
        if w in NEGATION_CUES or w.endswith("n't"):
            return True
        if w in fillers and skipped < _MAX_FILLERS:
            skipped += 1
            continue
        return False
    return False


# ------------------------------------------------------------------------------------------- numbers
@dataclass(frozen=True)
class NumberError:
    """Why a number token could not be read (returned, never raised)."""

    message: str


_MAX_DIGITS = 15
_NUMBER_SHAPE = re.compile(
    r"(?P<sign>[-+\u2212])? ?(?P<currency>[$\u20ac\u00a3])? ?(?P<sign2>[-+\u2212])?"
    r"(?P<body>[0-9][0-9.,]*|\.[0-9]+)(?P<exponent>[eE][-+]?[0-9]+)?(?P<suffix>[kKmM])?"
)
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")
_PLAIN = re.compile(r"[0-9]+(?:\.[0-9]+)?|[0-9]*\.[0-9]+")
_NON_FINITE = re.compile(r"[-+\u2212]?(?:inf(?:inity)?|nan)", re.IGNORECASE)


_NOT_ONE_NUMBER = (
    (re.compile(r"\d \d"), "a space splits its digits; write 1200 or 1,200"),
    (re.compile(r"\d['\u2019_]\d"), "separate thousands with a comma or not at all, e.g. 1,000 or 1000"),
    (re.compile(r"\d/\d"), "a fraction; write a decimal such as 0.5"),
    (re.compile(r"\d:\d"), "it reads as a time or a ratio, not one number"),
    (re.compile(r"%"), "a percentage; write the amount itself"),
    (re.compile(r"\d[-+\u2212\u2010-\u2015]"), "a range or a stray sign; write one number"),
    (re.compile(r"[^\x00-\x7f]"), "write it with the digits 0-9 alone"),
    (re.compile(r"\d[A-Za-z]|[A-Za-z]\d"), "letters in a number"),
)
"""Why a token captured as a number is not one plain number, by what it holds (the first that applies)."""


def _not_a_number(what: str, raw: str, text: str) -> NumberError:
    hint = next((why for shape, why in _NOT_ONE_NUMBER if shape.search(text)), None)
    return NumberError(f"{what} is not a number: {show(raw)}" + (f" ({hint})" if hint else ""))


def _format(value: float) -> str:
    return f"{value:,.10g}" if abs(value) < 1e15 else f"{value:.3g}"


def read_number(
    token: str,
    *,
    what: str = "the number",
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    integer: bool = False,
) -> float | int | NumberError:
    """Read one number token (see the module docstring), or say why it cannot be read.

    `minimum`/`maximum` are inclusive bounds, `above` an exclusive lower bound; `integer` asks for a
    whole number (returned as an int). Trailing sentence punctuation ("$150.") is ignored."""
    raw = str(token).strip()
    text = raw.rstrip(".,;:!?)")
    if not text:
        return NumberError(f"{what} is missing")
    if _NON_FINITE.fullmatch(text):
        return NumberError(f"{what} must be a finite number, got {show(raw)}")
    m = _NUMBER_SHAPE.fullmatch(text)
    if m is None:
        return _not_a_number(what, raw, text)
    if m["exponent"]:
        return NumberError(f"{what} uses exponent notation ({show(raw)}); write the number out in digits")
    if m["suffix"]:
        return NumberError(f"{what} has a '{m['suffix']}' suffix ({show(raw)}); write the number out in full")
    if m["sign"] and m["sign2"]:
        return NumberError(f"{what} has two signs: {show(raw)}")
    body = m["body"]
    if "," in body and not _GROUPED.fullmatch(body):
        return NumberError(
            f"{what} {show(raw)} is ambiguous: a comma may only separate groups of three digits "
            "(write 1.50 for a decimal, 1,500 or 1500 for a thousand and a half)"
        )
    if "," not in body and not _PLAIN.fullmatch(body):
        return _not_a_number(what, raw, text)
    digits = body.replace(",", "").replace(".", "").lstrip("0")
    if len(digits) > _MAX_DIGITS:
        return NumberError(f"{what} is out of range: {show(raw)} has more than {_MAX_DIGITS} digits")
    value = float(body.replace(",", ""))
    if (m["sign"] or m["sign2"] or "+") in "-\u2212":
        value = -value
    if not math.isfinite(value):  # pragma: no cover - 15 digits always fit a float
        return NumberError(f"{what} must be a finite number, got {show(raw)}")
    if integer and not value.is_integer():
        return NumberError(f"{what} must be a whole number, got {show(raw)}")
    if minimum is not None and value < minimum:
        return NumberError(f"{what} is out of range: it must be at least {_format(minimum)}, got {_format(value)}")
    if above is not None and not value > above:
        return NumberError(f"{what} is out of range: it must be more than {_format(above)}, got {_format(value)}")
    if maximum is not None and value > maximum:
        return NumberError(f"{what} is out of range: it must be at most {_format(maximum)}, got {_format(value)}")
    return int(value) if integer else value


def check_number(
    value: object,
    *,
    what: str = "the number",
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    integer: bool = False,
) -> str | None:
    """Why a structured value (a payload field, a scenario field) is not an acceptable number, or None:
    it must be an int or float (not a bool, not text), finite, whole when `integer`, and in range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{what} must be a number, got {show(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{what} must be a finite number, got {value!r}"
    if integer and not float(value).is_integer():
        return f"{what} must be a whole number, got {value!r}"
    if minimum is not None and value < minimum:
        return f"{what} must be at least {_format(minimum)}, got {_format(value)}"
    if above is not None and not value > above:
        return f"{what} must be more than {_format(above)}, got {_format(value)}"
    if maximum is not None and value > maximum:
        return f"{what} must be at most {_format(maximum)}, got {_format(value)}"
    return None


# ------------------------------------------------------------------------------------ last command
@dataclass(frozen=True)
class CommandMatch:
    """The last command found in a text."""

    kind: str
    """The grammar's name for the command."""
    groups: dict[str, str]
    """Named groups of the matching pattern."""
    message: str
    """The text with the command removed (what the agent 'said')."""
    start: int = 0
    """Where the command starts in `body`."""
    body: str = ""
    """The normalised text the command was found in."""
    group_starts: dict[str, int] = field(default_factory=dict)
    """Where each matched named group starts in `body`."""


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def find_last_command(text: str, patterns: Mapping[str, str], *, negation: bool = True) -> CommandMatch | None:
    """Find the command that ends latest in `text`.

    `patterns` maps a command kind to a regular expression (case-insensitive, matched against
    `normalise_text(text)`). Among all matches of all patterns the one starting last wins; on a tie the
    longer match wins (so `OFFER 5` beats a bare `OFFER`). With `negation`, matches negated by the
    words before them (`negated_before`) do not count."""
    body = normalise_text(text)
    found: list[tuple[int, int, str, re.Match[str]]] = []
    for kind, pattern in patterns.items():
        for match in _compiled(pattern).finditer(body):
            found.append((match.start(), match.end() - match.start(), kind, match))
    found.sort(key=lambda f: (f[0], f[1]), reverse=True)
    for start, _, kind, match in found:
        if negation and negated_before(body, start):
            continue
        message = squeeze(body[:start] + " " + body[match.end() :]).strip(" \n:-")
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        return CommandMatch(kind, groups, message, start, body, {k: match.start(k) for k in groups})
    return None
