"""Values of the standard lists a description names: IANA time zones, ISO 3166 country codes and one
country's subdivision codes (US states, Canadian provinces), ISO 4217 currency codes, ISO 639 language codes.

A description says which list an argument takes ("Two-letter US state code, e.g. WA", "ISO 4217 currency
code", "an IANA time zone name"); the explorer then tries members of that list, not only the example the
text gives. With one state known, every task asked about WA, and a model trained on them cannot name a
station in Oregon: it has never seen the argument take another value. The lists are read from the
system's tz database and from pycountry's ISO tables, never from a word list here.

Every function is pure but for the tables it reads once (cached).
"""

from __future__ import annotations

import re
from functools import lru_cache

# ----------------------------------------------------------------------- time zones

# A named standard whose values the standard library lists: an "IANA time zone name" argument is
# tried with zones of the tz database, not only the one or two its description shows.
ZONE_STANDARD = re.compile(r"\bIANA\b|\btz ?database\b|\bOlson\b", re.IGNORECASE)
_ZONE_AREAS = ("Africa", "America", "Asia", "Australia", "Europe", "Pacific")
ZONES_TRIED = 48
CODES_TRIED = 24  # members of a code list tried, spread over the list (the explorer's pool holds 30 per argument)


@lru_cache(maxsize=1)
def zone_names() -> frozenset[str]:
    """Every zone name of the system's tz database (empty where it has none)."""
    import zoneinfo

    try:
        return frozenset(zoneinfo.available_timezones())
    except Exception:  # noqa: BLE001  (no tz database on this system: nothing to offer)
        return frozenset()


@lru_cache(maxsize=1)
def canonical_zones() -> frozenset[str]:
    """The zones the tz database's `zone.tab` lists: one per region of a country, three-part names
    (`America/Argentina/Buenos_Aires`) included, backward links (`Asia/Ashkhabad`, `Europe/Belfast`) not;
    every zone name where no `zone.tab` is found."""
    import zoneinfo
    from pathlib import Path

    for base in zoneinfo.TZPATH:
        table = Path(base) / "zone.tab"
        if table.is_file():
            rows = [line.split("\t") for line in table.read_text(encoding="utf-8").splitlines()]
            return frozenset(row[2] for row in rows if len(row) >= 3 and not row[0].startswith("#")) & zone_names()
    return zone_names()


def time_zones(count: int = ZONES_TRIED) -> list[str]:
    """`count` IANA zone names, as many from each area as from any other (every k-th of an area's
    sorted names: deterministic): the tz database lists America's zones three times as often as
    Asia's, and a model trained on a share that large puts any city in America (`America/Lagos`)."""
    areas = [sorted(z for z in canonical_zones() if z.split("/")[0] == area) for area in _ZONE_AREAS]
    areas = [names for names in areas if names]
    if not areas:
        return []
    picked: list[str] = []
    for i, names in enumerate(areas):
        share = count // len(areas) + (i < count % len(areas))
        picked += names[::max(1, len(names) // share)][:share] if share else []
    return sorted(picked)


# ----------------------------------------------------------------------- ISO code lists

_COUNTRY = re.compile(r"\bcountry\s+codes?\b|\bISO[- ]?3166(?:-1)?(?!-2)\b", re.IGNORECASE)
_ALPHA3 = re.compile(r"\balpha-?3\b|\bthree-letter\b|\b3-letter\b", re.IGNORECASE)
_SUBDIVISION = re.compile(r"\b(?:state|province|territory|region|prefecture|county|canton)\s+"
                          r"(?:codes?|abbreviations?)\b|\bISO[- ]?3166-2\b", re.IGNORECASE)
_CURRENCY = re.compile(r"\bcurrency\s+codes?\b|\bISO[- ]?4217\b", re.IGNORECASE)
_LANGUAGE = re.compile(r"\blanguage\s+codes?\b|\bISO[- ]?639(?:-1)?\b", re.IGNORECASE)
_CODE = re.compile(r"(?<![\w-])([A-Z]{2,3}(?:-[A-Z0-9]{1,3})?)(?![\w-])")
# a code in lower case only where the text shows it as an example or quoted ('in' and 'or' are words)
_LOWER_EXAMPLE = re.compile(r"(?:\be\.g\.|\bfor example|\bsuch as|\blike)\s*[:,]?\s*['\"`]?([a-z]{2,3})\b"
                            r"|['\"`]([a-z]{2,3})['\"`]")


@lru_cache(maxsize=1)
def _iso():
    """pycountry's tables, or None where it is not installed (then no code list is offered)."""
    try:
        import pycountry
    except ImportError:
        return None
    return pycountry


def spread(items: list[str], count: int) -> list[str]:
    """`count` items evenly spaced over `items` (all of them when there are no more): deterministic,
    and not the first letters of the alphabet only."""
    if len(items) <= count:
        return list(items)
    return [items[round(i * len(items) / count)] for i in range(count)]


def _named_country(text: str, iso) -> str | None:
    """The alpha-2 code of the one country a text names, by code ('US', 'USA', 'U.S.') or by name."""
    found = set()
    for token in _CODE.findall(text.replace("U.S.", "US")):
        country = iso.countries.get(alpha_2=token) or iso.countries.get(alpha_3=token)
        if country is not None:
            found.add(country.alpha_2)
    lowered = text.casefold()
    for country in iso.countries:
        names = {getattr(country, key, "") for key in ("name", "common_name", "official_name")} - {""}
        if any(re.search(rf"\b{re.escape(name.casefold())}\b", lowered) for name in names):
            found.add(country.alpha_2)
    return found.pop() if len(found) == 1 else None


def _subdivisions(text: str, iso) -> list[str]:
    """One country's subdivision codes, as the text's examples write them ('WA', or 'US-WA' in full)."""
    examples = _CODE.findall(text)
    prefixes = {e.split("-", 1)[0] for e in examples if "-" in e and iso.countries.get(alpha_2=e.split("-", 1)[0])}
    country = prefixes.pop() if len(prefixes) == 1 else _named_country(text, iso)
    candidates = [country] if country else sorted({s.country_code for s in iso.subdivisions
                                                   if s.code.split("-", 1)[1] in examples})
    for code in candidates:
        members = sorted(s.code for s in iso.subdivisions.get(country_code=code) or [])
        short = {m.split("-", 1)[1] for m in members}
        shown = [e for e in examples if e in short or e in members]
        if country is None and not shown:
            continue
        if country is None and len(candidates) > 1:
            return []  # 'WA' is a state of the US and of Australia: the text does not say which
        full = any("-" in e for e in shown)
        return [m if full else m.split("-", 1)[1] for m in members]
    return []


def code_list(text: str) -> list[str]:
    """Every member of the ISO code list a text names ("Two-letter US state code, e.g. WA" -> the US
    states' codes; "ISO 4217 currency code" -> 'AED' ... 'ZWL'), in lower case where the text's examples
    are ('usd'); [] when it names none, or a subdivision list of no one country."""
    if not text or not any(p.search(text) for p in (_SUBDIVISION, _COUNTRY, _CURRENCY, _LANGUAGE)):
        return []
    iso = _iso()
    if iso is None:
        return []
    language = False
    if _SUBDIVISION.search(text):
        members = _subdivisions(text, iso)
    elif _COUNTRY.search(text):
        key = "alpha_3" if _ALPHA3.search(text) else "alpha_2"
        members = sorted(getattr(c, key) for c in iso.countries)
    elif _CURRENCY.search(text):
        members = sorted(c.alpha_3 for c in iso.currencies)
    else:
        members, language = sorted(lang.alpha_2.upper() for lang in iso.languages if hasattr(lang, "alpha_2")), True
    upper_codes, lower_codes = set(_CODE.findall(text)), {a or b for a, b in _LOWER_EXAMPLE.findall(text)}
    shown_upper = any(m in upper_codes for m in members)  # each text read once, not once per member
    shown_lower = any(m.lower() in lower_codes for m in members)
    # languages are written 'en', everything else 'US', unless the text's examples show the other case
    if not shown_upper and (shown_lower or language):
        return [m.lower() for m in members]
    return members


def list_words(text: str) -> set[str]:
    """The words naming the code lists a text names ('state' for "US state code", 'currency' for "ISO 4217")."""
    words = {m.group(0).split()[0].casefold() for m in _SUBDIVISION.finditer(text) if " " in m.group(0)}
    for pattern, named in ((_COUNTRY, {"country"}), (_CURRENCY, {"currency"}), (_LANGUAGE, {"language", "lang"})):
        if pattern.search(text):
            words |= named
    return words


def code_values(text: str, count: int = CODES_TRIED, about: set[str] | None = None) -> list[str]:
    """`count` members of the code list a text names, spread over the list; with `about` (an argument's
    name words), only when the list's own word is among them: a tool's description that names "a state
    code" offers it to `state`, not to its `city`."""
    if about is not None and not list_words(text) & about:
        return []
    return spread(code_list(text), count)
